"""The figures of the scale benchmark (``loadtest.scale``), computed from what it sampled.
Pure: the policies it creates, when their descheduler CronJobs fire, the API server's
request counters read as rates, histogram quantiles, the floor and its ratio."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loadtest.planner import namespace
from localcluster.cluster import scrape
from localcluster.demo.scenario import TeamPolicy

CLUSTER_TEAMS = 10  # teams whose two namespaces one ClusterCompactionPolicy covers
NAMESPACED_TEAMS = 5  # teams with a CompactionPolicy in each of their two namespaces
TEAMS = CLUSTER_TEAMS + NAMESPACED_TEAMS
CRON_EVERY = 10  # minutes between two runs of one policy's descheduler


def team_namespace(mixed: str, team: int) -> str:
    """Where team ``team``'s share of the mix's namespace ``mixed`` is."""
    return namespace(mixed, team, TEAMS)


def spec(minute: int, namespaces: Sequence[str] = ()) -> dict[str, Any]:
    """A policy that labels in place (no runtime hook: what is measured is the controller
    carrying the policies onto 150,000 Pods, then its drains), with the compaction
    scheduler, its descheduler every ``CRON_EVERY`` minutes from ``minute``."""
    scope: dict[str, Any] = {"workloadTypes": ["Deployment"]}
    if namespaces:
        scope["namespaceSelector"] = {"operator": "In", "values": list(namespaces)}
    return {"scope": scope, "enabled": True, "setLabelsByEviction": False,
            "scheduler": {"useManagedScheduler": True},
            "descheduler": {
                "enabled": True, "interval": f"{minute}-59/{CRON_EVERY} * * * *",
                "maxNoOfPodsToEvictPerNode": 5, "maxNoOfPodsToEvictPerNamespace": 50,
                "maxNoOfPodsToEvictTotal": 100,
                "highNodeUtilization": {"numberOfNodes": 0, "thresholds": {
                    "cpu": 65, "memory": 65, "pods": 65}}}}


def policies() -> tuple[TeamPolicy, ...]:
    """20 policies on shared nodes: a ClusterCompactionPolicy over each of the first ten
    teams' two namespaces, a CompactionPolicy in each namespace of the other five; their
    CronJobs two to a minute, as ``CRON_EVERY`` minutes spread them."""
    out = [TeamPolicy(f"team-{k:02d}", {}) for k in range(CLUSTER_TEAMS)]
    out += [TeamPolicy("team", {}, team_namespace(mixed, k))
            for k in range(CLUSTER_TEAMS, TEAMS) for mixed in ("production", "batch")]
    return tuple(
        TeamPolicy(p.name, spec(i % CRON_EVERY, () if p.namespace else (
            team_namespace("production", i), team_namespace("batch", i))), p.namespace)
        for i, p in enumerate(out))


def cron_minutes(field_: str, minutes: int = 60) -> list[int]:
    """The minutes of the hour a cron minute field fires at: ``*``, ``*/s``, ``a``, ``a-b``,
    ``a-b/s``, comma-separated (what ``spec.descheduler.interval`` takes)."""
    out: set[int] = set()
    for part in field_.split(","):
        span, _, step = part.partition("/")
        if span == "*":
            lo, hi = 0, minutes - 1
        elif "-" in span:
            a, b = span.split("-")
            lo, hi = int(a), int(b)
        else:
            lo = hi = int(span)
            if step:
                hi = minutes - 1
        out.update(range(lo, hi + 1, int(step or 1)))
    return sorted(out)


def stagger(schedules: Sequence[str], minutes: int) -> list[tuple[int, int]]:
    """(minute, policy index) of every CronJob firing in the first ``minutes`` of an hour,
    in order: the runs of each policy's descheduler as the CronJob controller starts them."""
    fires = [(m, i) for i, schedule in enumerate(schedules)
             for m in cron_minutes(schedule.split()[0]) if m < minutes]
    return sorted(fires)


def rates(before: str, after: str, seconds: float,
          name: str = "apiserver_request_total") -> dict[str, float]:
    """Requests per minute between two scrapes of the API server's /metrics, by verb and
    resource (``pods/status`` for a subresource), the busiest first; a counter that went
    backwards (a restart) counts from zero."""
    def by_key(text: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for labels, value in scrape.series(text, name):
            resource = labels.get("resource", "")
            if labels.get("subresource"):
                resource += "/" + labels["subresource"]
            key = f"{labels.get('verb', '')} {resource}".strip()
            out[key] = out.get(key, 0.0) + value
        return out
    b, a = by_key(before), by_key(after)
    per_min = 60.0 / seconds if seconds > 0 else 0.0
    out = {k: (v - b.get(k, 0.0) if v >= b.get(k, 0.0) else v) * per_min for k, v in a.items()}
    return dict(sorted(((k, v) for k, v in out.items() if v > 0), key=lambda kv: (-kv[1],
                                                                                  kv[0])))


def listed(before: str, after: str) -> dict[str, float]:
    """Objects the API server sent between two scrapes, by resource: returned to lists, from
    its watch cache and from etcd, and sent on watches (a client-go informer's first list is
    a watch that streams every object, ``sendInitialEvents``, so it counts there)."""
    def resource(labels: Mapping[str, str]) -> str:
        """``resource``, or an older API server's ``resource_prefix`` or ``kind``."""
        name = (labels.get("resource") or labels.get("resource_prefix", "").strip("/")
                or labels.get("kind", "").lower())
        return name.split("/")[-1]

    out: dict[str, float] = {}
    for name in ("apiserver_cache_list_returned_objects_total",
                 "apiserver_storage_list_returned_objects_total",
                 "apiserver_watch_events_total"):
        b: dict[tuple[tuple[str, str], ...], float] = {
            tuple(sorted(labels.items())): v for labels, v in scrape.series(before, name)}
        for labels, v in scrape.series(after, name):
            grew = v - b.get(tuple(sorted(labels.items())), 0.0)
            if grew > 0:
                out[resource(labels)] = out.get(resource(labels), 0.0) + grew
    return out


@dataclass(frozen=True)
class Phases:
    """p50 and p99 (seconds) of the whole pass and of each of its phases, from histograms."""
    passes: int
    p50: Mapping[str, float]
    p99: Mapping[str, float]


def phases(before: str, after: str) -> Phases:
    """The controller's passes between two scrapes of its /metrics: the pass and its read,
    plan and write, each as p50 and p99."""
    hists: dict[str, scrape.Buckets] = {"pass": scrape.delta(
        scrape.histogram(after, "compactor_reconcile_duration_seconds"),
        scrape.histogram(before, "compactor_reconcile_duration_seconds"))}
    for phase in ("read", "plan", "write"):
        name, match = "compactor_reconcile_phase_duration_seconds", {"phase": phase}
        hists[phase] = scrape.delta(scrape.histogram(after, name, match),
                                    scrape.histogram(before, name, match))
    count = hists["pass"][-1][1] if hists["pass"] else 0.0
    return Phases(int(count), {k: scrape.quantile(h, 0.5) for k, h in hists.items()},
                  {k: scrape.quantile(h, 0.99) for k, h in hists.items()})


@dataclass(frozen=True)
class FloorRun:
    in_flight: int
    patches: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.patches / self.seconds if self.seconds > 0 else 0.0


def floor_seconds(runs: Iterable[FloorRun], pods: int) -> tuple[float, FloorRun | None]:
    """The floor for labelling ``pods`` Pods: at the best rate of the bare loops, and that
    loop."""
    best = max(runs, key=lambda r: r.rate, default=None)
    if best is None or best.rate <= 0:
        return math.nan, best
    return pods / best.rate, best


@dataclass(frozen=True)
class DeschedulerRun:
    policy: str
    seconds: float
    rss_mib: float
    listed: Mapping[str, float]  # objects the API server returned to its lists, by resource
    apiserver_cpu: float  # the API server's CPU seconds during the run, its idle rate removed
    evicted: int
    marked: int = 0  # its policy's Pods the planner had marked when it started: what it may evict


@dataclass(frozen=True)
class Figures:
    nodes: int
    pods: int  # Pods the policies manage (every Deployment's)
    policies: int
    build_s: float
    labelled_s: float  # policies created -> every managed Pod labelled
    first_drain_s: float  # policies created -> a policy's first node draining (nan: none)
    floor_s: float  # the same Pods' label PATCHes at the floor's best rate
    floor: tuple[FloorRun, ...]
    labelling: Phases
    steady: Phases
    rss_mib: Mapping[str, float]  # peak, per process
    cpu_labelling: Mapping[str, float]  # CPU seconds while labelling, per process
    cpu_steady: Mapping[str, float]  # CPU seconds per minute in the steady state
    steady_rpm: Mapping[str, float]  # the API server's requests/min by verb and resource
    labelling_requests: Mapping[str, float]  # its requests while labelling, by the same
    controller_rpm: float
    events_per_pass: float
    status_writes_per_pass: float
    load: str  # the load average, as uptime prints it, at the start and the end
    runs: tuple[DeschedulerRun, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ratio(self) -> float:
        return self.labelled_s / self.floor_s if self.floor_s > 0 else math.nan


def events_and_status(rpm: Mapping[str, float], passes_per_min: float) -> tuple[float, float]:
    """Events written (created or patched) and policy status writes, per pass, from the
    steady state's requests per minute."""
    if passes_per_min <= 0:
        return 0.0, 0.0
    events = sum(v for k, v in rpm.items() if k in ("POST events", "PATCH events",
                                                    "PUT events"))
    status = sum(v for k, v in rpm.items() if k.split()[0] in ("PATCH", "PUT", "APPLY")
                 and k.endswith("compactionpolicies/status"))
    return events / passes_per_min, status / passes_per_min


def _cell(v: float, fmt: str = "{:.1f}") -> str:
    return "—" if isinstance(v, float) and math.isnan(v) else fmt.format(v)


def table(runs: Sequence[Figures]) -> str:
    """Markdown: one column per size."""
    head = ["", *(f"{r.nodes:,} nodes" for r in runs)]
    rows: list[tuple[str, list[str]]] = [
        ("managed Pods / policies", [f"{r.pods:,} / {r.policies}" for r in runs]),
        ("cluster built (s)", [_cell(r.build_s, "{:.0f}") for r in runs]),
        ("policies → every Pod labelled (s)", [_cell(r.labelled_s) for r in runs]),
        ("floor: the same PATCHes at the best of 8/16/32 in flight (s)",
         [_cell(r.floor_s) for r in runs]),
        ("… its rate (PATCH/s, in flight)", [
            ", ".join(f"{f.rate:.0f} ({f.in_flight})" for f in r.floor) for r in runs]),
        ("labelling / floor (goal ≤ 1.5)", [_cell(r.ratio, "{:.2f}") for r in runs]),
        ("policies → first drain under way (s)", [_cell(r.first_drain_s) for r in runs]),
    ]
    for label, attr in (("while labelling", "labelling"), ("steady", "steady")):
        of: list[Phases] = [getattr(r, attr) for r in runs]
        rows.append((f"passes {label}", [str(p.passes) for p in of]))
        for part in ("pass", "read", "plan", "write"):
            rows.append((f"{part} {label}: p50 / p99 (s)", [
                f"{_cell(p.p50.get(part, math.nan), '{:.2f}')} / "
                f"{_cell(p.p99.get(part, math.nan), '{:.2f}')}" for p in of]))
    procs = sorted({p for r in runs for p in r.rss_mib})
    for p in procs:
        rows.append((f"{p}: peak RSS (MiB)", [_cell(r.rss_mib.get(p, math.nan), "{:.0f}")
                                              for r in runs]))
    for p in sorted({p for r in runs for p in r.cpu_labelling},
                    key=lambda p: -runs[-1].cpu_labelling.get(p, 0.0)):
        rows.append((f"{p}: CPU s while labelling / CPU s per min steady", [
            f"{_cell(r.cpu_labelling.get(p, math.nan))} / "
            f"{_cell(r.cpu_steady.get(p, math.nan), '{:.2f}')}" for r in runs]))
    rows += [
        ("steady: all API requests/min", [_cell(sum(r.steady_rpm.values()), "{:.0f}")
                                          for r in runs]),
        ("steady: the controller's requests/min", [_cell(r.controller_rpm) for r in runs]),
        ("steady: Events written per pass", [_cell(r.events_per_pass, "{:.2f}")
                                             for r in runs]),
        ("steady: policy status writes per pass", [_cell(r.status_writes_per_pass, "{:.2f}")
                                                   for r in runs]),
        ("load average (start → end)", [r.load for r in runs]),
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join([label, *cells]) + " |" for label, cells in rows]
    return "\n".join(lines)


def requests_table(runs: Sequence[Figures], top: int = 15, attr: str = "steady_rpm",
                   what: str = "steady requests/min") -> str:
    """Requests by verb and resource (the steady state's per minute, or ``attr``), the
    busiest at the largest size first."""
    of: list[Mapping[str, float]] = [getattr(r, attr) for r in runs]
    keys = list(of[-1])[:top] if runs else []
    keys += [k for counts in of[:-1] for k in list(counts)[:top] if k not in keys]
    head = [what, *(f"{r.nodes:,} nodes" for r in runs)]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join([f"`{k}`", *(f"{c.get(k, 0.0):,.1f}" for c in of)])
              + " |" for k in keys]
    return "\n".join(lines)


def runs_table(runs: Sequence[Figures]) -> str:
    """One row per descheduler run."""
    lines = ["| nodes | policy | wall (s) | peak RSS (MiB) | objects sent to it (lists, "
             "watches) | API server CPU (s) | marked for it / evicted |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in runs:
        for d in r.runs:
            objects = ", ".join(f"{k} {v:,.0f}" for k, v in sorted(
                d.listed.items(), key=lambda kv: -kv[1]) if v >= 1)
            lines.append(f"| {r.nodes:,} | {d.policy} | {d.seconds:.1f} | {d.rss_mib:.0f} | "
                         f"{objects} | {d.apiserver_cpu:.1f} | {d.marked} / {d.evicted} |")
    return "\n".join(lines)


def verdicts(big: Figures) -> list[tuple[str, bool, str]]:
    """The goals, judged at the largest size."""
    rss = big.rss_mib
    worst = max(big.runs, key=lambda d: d.seconds, default=None)
    fattest = max((d.rss_mib for d in big.runs), default=math.nan)
    return [
        ("labelling within 1.5× of the floor", big.ratio <= 1.5,
         f"{big.labelled_s:.1f} s against {big.floor_s:.1f} s: {big.ratio:.2f}×"),
        ("controller peak RSS under 1 GiB", rss.get("compactor-controller", math.inf) < 1024,
         f"{rss.get('compactor-controller', math.nan):.0f} MiB"),
        ("webhook peak RSS under 300 MiB", rss.get("webhook", math.inf) < 300,
         f"{rss.get('webhook', math.nan):.0f} MiB"),
        ("steady pass p99 under 10 s", big.steady.p99.get("pass", math.inf) < 10,
         f"{big.steady.p99.get('pass', math.nan):.2f} s"),
        ("each descheduler run under 1 GiB and a minute",
         worst is not None and worst.seconds < 60 and fattest < 1024,
         f"longest {worst.seconds:.1f} s, largest {fattest:.0f} MiB" if worst else "no run"),
    ]
