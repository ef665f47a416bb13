"""`make bench-e2e` (not in CI): how Compactor's cost grows from 100 to 300 to 500 nodes.

Each size gets a cluster of its own: kwok nodes with about 30 Pods each, one copy of the
demo's mix of workloads per 10 nodes (plus what must never move), the webhook, the
controller and the compaction scheduler as processes. After a policy change it reports, per
size, the time until every workload and every Pod is labelled, the reconcile pass (mean,
p99, how many over 5 s), the planner's share of it, the peak RSS of controller and webhook,
and steady-state API requests per minute (controller, webhook, the whole API server) and
Events the controller writes per pass; then the growth exponent of each figure between sizes,
and judges the targets at the largest size.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from compaction import names
from localcluster import Cluster, ClusterConfig, Kube
from localcluster.bench import compaction_scale
from localcluster.cluster import scrape
from localcluster.cluster.kube import path
from localcluster.cluster.process import Process
from localcluster.cluster.procstat import cpu_seconds, peak_rss_mib
from localcluster.cluster.stack import CompactorStack, start_local, webhook_metric
from localcluster.demo.scenario import (
    MANAGED_NAMESPACES,
    NAMESPACES,
    POLICY,
    App,
    Scenario,
    apply_policy,
    create,
    policy_spec,
)

METADATA_ONLY = {"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"}


# The demo's mix per copy: 290 managed Pods, five workloads of four kinds of behaviour.
MIX: tuple[App, ...] = (
    App("production", "web", 100, "50m", "128Mi"),
    App("production", "api", 70, "100m", "256Mi"),
    App("production", "cache", 10, "250m", "512Mi", kind="StatefulSet"),
    App("batch", "worker", 70, "100m", "256Mi"),
    App("batch", "report", 40, "50m", "128Mi"),
)
NODES_PER_MIX = 10


def scenario(nodes: int, nodes_per_mix: int = NODES_PER_MIX) -> Scenario:
    """``nodes`` kwok nodes with 29 managed Pods each: one copy of the demo's mix per
    ``nodes_per_mix`` nodes, so that workloads grow with the cluster as Pods do (a cluster of
    15,000 Pods runs hundreds of workloads, not five of thousands of replicas each). With
    ``nodes_per_mix`` at ``nodes`` there is one copy, its replicas scaled instead."""
    copies = max(1, round(nodes / nodes_per_mix))
    factor = nodes / (NODES_PER_MIX * copies)

    def n(x: int) -> int:
        return max(1, round(x * factor))
    spec = policy_spec(1)
    spec["setLabelsByEviction"] = False  # measure the reconcile, not a compaction
    apps = tuple(dataclasses.replace(app, name=f"{app.name}-{i:03d}" if copies > 1 else app.name,
                                     replicas=n(app.replicas))
                 for i in range(copies) for app in MIX)
    return Scenario(nodes=nodes, policy_spec=spec, apps=apps)


@dataclass(frozen=True)
class Figures:
    nodes: int
    pods: int  # every Pod of the cluster
    workloads_s: float  # policy change -> every workload labelled
    pods_s: float  # policy change -> every Pod labelled in place
    pass_mean_s: float
    pass_p99_s: float
    passes_over_5s: int
    plan_mean_s: float
    plan_p99_s: float
    controller_rss_mib: float
    webhook_rss_mib: float
    controller_rpm: float  # steady state, requests per minute
    controller_watch_rpm: float  # of those, watches opened (renewals, at any size)
    webhook_rpm: float
    apiserver_rpm: float
    throttled: int  # the controller's requests answered 429
    apf_rejected: int  # requests the API server's priority and fairness rejected, anyone's
    # steady state: Events the controller wrote (created, or said again) per reconcile pass
    events_per_pass: float = 0.0
    # CPU seconds each process spent from the policy change until every Pod was labelled
    cpu: Mapping[str, float] = field(default_factory=dict)


# --- pure: quantiles, exponents, the table, the verdicts ---------------------------------




def exponent(small: float, large: float, n_small: int, n_large: int) -> float:
    """k in figure ∝ size^k between two sizes: 1 linear, 0 flat."""
    if small <= 0 or large <= 0 or not math.isfinite(small) or not math.isfinite(large):
        return float("nan")
    return math.log(large / small) / math.log(n_large / n_small)


ROWS: tuple[tuple[str, str, str], ...] = (
    # field, label, format
    ("pods", "Pods in the cluster", "{:.0f}"),
    ("workloads_s", "policy change → every workload labelled (s)", "{:.1f}"),
    ("pods_s", "policy change → every Pod labelled (s)", "{:.1f}"),
    ("pass_mean_s", "reconcile pass, mean (s)", "{:.2f}"),
    ("pass_p99_s", "reconcile pass, p99 (s)", "{:.2f}"),
    ("passes_over_5s", "passes longer than 5 s", "{:.0f}"),
    ("plan_mean_s", "planner (plan()), mean (s)", "{:.3f}"),
    ("plan_p99_s", "planner (plan()), p99 (s)", "{:.3f}"),
    ("controller_rss_mib", "controller peak RSS (MiB)", "{:.0f}"),
    ("webhook_rss_mib", "webhook peak RSS (MiB)", "{:.0f}"),
    ("controller_rpm", "steady state: controller requests/min", "{:.1f}"),
    ("controller_watch_rpm", "… of which watch renewals", "{:.1f}"),
    ("webhook_rpm", "steady state: webhook requests/min", "{:.1f}"),
    ("apiserver_rpm", "steady state: all API server requests/min", "{:.0f}"),
    ("throttled", "controller requests answered 429", "{:.0f}"),
    ("apf_rejected", "requests rejected by priority and fairness", "{:.0f}"),
    ("events_per_pass", "steady state: Events written per pass", "{:.2f}"),
)
_FLAT = frozenset({"passes_over_5s", "throttled", "apf_rejected", "pods",
                   "controller_watch_rpm", "events_per_pass"})


def table(runs: Sequence[Figures]) -> str:
    """Markdown: one column per size, then the growth exponent between consecutive sizes."""
    head = ["nodes", *(str(r.nodes) for r in runs),
            *(f"k {a.nodes}→{b.nodes}" for a, b in zip(runs, runs[1:], strict=False))]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for name, label, fmt in ROWS:
        values = [getattr(r, name) for r in runs]
        cells = [fmt.format(v) for v in values]
        if name not in _FLAT:
            cells += [_k(exponent(values[i], values[i + 1], runs[i].nodes, runs[i + 1].nodes))
                      for i in range(len(runs) - 1)]
        else:
            cells += [""] * (len(runs) - 1)
        lines.append("| " + " | ".join([label, *cells]) + " |")
    return "\n".join(lines)


def cpu_table(runs: Sequence[Figures]) -> str:
    """Where the labelling's CPU went: seconds per process, per size."""
    procs = sorted({p for r in runs for p in r.cpu}, key=lambda p: -runs[-1].cpu.get(p, 0))
    head = ["CPU s while labelling", *(str(r.nodes) for r in runs)]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for proc in procs:
        lines.append("| " + " | ".join([proc, *(f"{r.cpu.get(proc, 0):.1f}" for r in runs)])
                     + " |")
    return "\n".join(lines)


def _k(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.2f}"


def verdicts(runs: Sequence[Figures]) -> list[tuple[str, bool, str]]:
    """The targets, judged at the largest size (steady requests against the smallest, without
    watch renewals: each watch cache renews its own every 5 to 10 minutes at any size, so a
    two-minute window holds none or several depending on when it falls)."""
    big, small = runs[-1], runs[0]
    big_rpm, small_rpm = (r.controller_rpm - r.controller_watch_rpm for r in (big, small))
    flat = big_rpm <= 1.2 * small_rpm + 2
    return [
        (f"every Pod labelled < 60 s after a policy change at {big.nodes} nodes",
         big.pods_s < 60, f"{big.pods_s:.1f} s for {big.pods} Pods"),
        ("controller peak RSS < 300 MiB", big.controller_rss_mib < 300,
         f"{big.controller_rss_mib:.0f} MiB"),
        ("webhook peak RSS < 200 MiB", big.webhook_rss_mib < 200,
         f"{big.webhook_rss_mib:.0f} MiB"),
        ("no reconcile pass longer than 5 s", big.passes_over_5s == 0,
         f"{big.passes_over_5s} over 5 s; p99 {big.pass_p99_s:.2f} s"),
        ("steady controller requests/min, watch renewals aside, do not grow with Pods "
         "(within 20 % + 2)", flat,
         f"{small_rpm:.1f} at {small.nodes} nodes, {big_rpm:.1f} at {big.nodes}"),
        ("no 429 storm", big.throttled == 0 and big.apf_rejected == 0,
         f"{big.throttled} answered 429 to the controller, {big.apf_rejected} rejected by "
         "priority and fairness"),
    ]


# --- I/O: one size on its own cluster -----------------------------------------------------




def _cpu_seconds(processes: Sequence[Process]) -> dict[str, float]:
    out = {}
    for proc in processes:
        if proc.pid is None or not proc.running():
            continue
        name = "webhook" if proc.name.startswith("webhook-") else proc.name
        out[name] = cpu_seconds(proc.pid)
    return out








def _settled(kube: Kube, s: Scenario) -> bool:
    """Every workload reports all its replicas ready (cheaper than listing 15,000 Pods)."""
    for ns in NAMESPACES:
        for kind in ("deployments", "statefulsets"):
            for w in kube.items(path(kind, ns)):
                if (w.get("status") or {}).get("readyReplicas", 0) != w["spec"]["replicas"]:
                    return False
        for ds in kube.items(path("daemonsets", ns)):
            status = ds.get("status") or {}
            if status.get("numberReady", 0) != s.nodes or status.get(
                    "desiredNumberScheduled", 0) != s.nodes:
                return False
    return True


def _all_pods_labelled(kube: Kube) -> bool:
    """No managed Pod without the policy label: one Pod's metadata at most per namespace, so
    that asking every second costs what is measured next to nothing (listing the 15,000
    Pods' metadata each second cost a quarter of a core, in this process alone)."""
    for ns in MANAGED_NAMESPACES:
        out = kube.request("GET", path("pods", ns), params={
            "labelSelector": f"!{names.POLICY_LABEL},app!=node-agent", "limit": "1"},
            headers=METADATA_ONLY)
        if out.get("items"):
            return False
    return True


def _workloads_labelled(kube: Kube, s: Scenario) -> bool:
    """No workload of the mix without the policy's label: only the unlabelled ones are
    listed (metadata), so the probe costs little when hundreds of workloads are labelled."""
    apps = {(a.namespace, a.kind, a.name) for a in s.apps}
    for ns in sorted({a.namespace for a in s.apps}):
        for kind in sorted({a.kind for a in s.apps}):
            out = kube.request("GET", path(kind.lower() + "s", ns), params={
                "labelSelector": f"{names.POLICY_LABEL}!={POLICY}"}, headers=METADATA_ONLY)
            if any((ns, kind, w["metadata"]["name"]) in apps for w in out.get("items") or ()):
                return False
    return True


def _wait(what: str, probe: Callable[[], bool], timeout: float, interval: float) -> float:
    started = time.monotonic()
    while not probe():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
    return time.monotonic() - started


def measure(nodes: int, steady_seconds: float, nodes_per_mix: int = NODES_PER_MIX) -> Figures:
    s = scenario(nodes, nodes_per_mix)
    workdir = Path(tempfile.mkdtemp(prefix=f"compactor-bench-e2e-{nodes}-"))
    with Cluster(ClusterConfig(workdir=workdir, start_timeout=300)) as cluster:
        kube, stack = start_local(cluster, workdir / "compactor", resync_seconds=30,
                                  webhook_cache_ttl=30, grace_seconds=35)
        started = time.monotonic()
        print(f"{nodes} nodes: creating them and {s.expected_pods} Pods ...", flush=True)
        create(cluster, kube, s, wait=False)
        _wait("every Pod Running", lambda: _settled(kube, s), 1800, 3)
        print(f"  populated in {time.monotonic() - started:.0f} s", flush=True)
        time.sleep(5)
        cpu0 = _cpu_seconds(cluster.processes)
        apply_policy(kube, s)
        workloads_s = _wait("every workload labelled", lambda: _workloads_labelled(kube, s),
                            600, 0.2)
        pods_s = _wait("every Pod labelled", lambda: _all_pods_labelled(kube),
                       900 - workloads_s, 1.0) + workloads_s
        cpu = {k: v - cpu0.get(k, 0.0) for k, v in _cpu_seconds(cluster.processes).items()}
        print(f"  labelled: workloads {workloads_s:.1f} s, Pods {pods_s:.1f} s", flush=True)
        time.sleep(10)  # the last passes and their echoes
        figures = _steady(kube, stack, cluster, s, workloads_s, pods_s, steady_seconds)
        return dataclasses.replace(figures, cpu=cpu)


def _steady(kube: Kube, stack: CompactorStack, cluster: Cluster, s: Scenario,
            workloads_s: float, pods_s: float, seconds: float) -> Figures:
    assert stack.webhook is not None
    hook = stack.webhook

    def apiserver() -> float:
        return scrape.value(kube.raw("/metrics").text, "apiserver_request_total")
    def told() -> int:
        """Every Event the controller wrote, each as often as it was said (its count)."""
        return sum(int(e.get("count") or 1) for e in kube.items(
            path("events"), f"{names.MANAGED_BY_LABEL}={names.MANAGED_BY_VALUE}"))

    def passes_so_far() -> float:
        buckets = scrape.histogram(_controller_metrics(stack),
                                   "compactor_reconcile_duration_seconds")
        return buckets[-1][1] if buckets else 0.0
    c0 = stack.controller_metric("compactor_controller_api_requests")
    cw0 = stack.controller_metric("compactor_controller_api_watches")
    w0 = webhook_metric(hook, "compactor_owner_api_requests_total")
    a0 = apiserver()
    e0, p0 = told(), passes_so_far()
    time.sleep(seconds)
    e1, p1 = told(), passes_so_far()
    per_min = 60.0 / seconds
    c1 = stack.controller_metric("compactor_controller_api_requests")
    cw1 = stack.controller_metric("compactor_controller_api_watches")
    w1 = webhook_metric(hook, "compactor_owner_api_requests_total")
    a1 = apiserver()
    metrics = _controller_metrics(stack)
    passes = scrape.histogram(metrics, "compactor_reconcile_duration_seconds")
    plans = scrape.histogram(metrics, "compactor_plan_duration_seconds")
    count = passes[-1][1] if passes else 0.0
    under5 = next((c for le, c in passes if le == 5.0), count)
    server = kube.raw("/metrics").text
    return Figures(
        nodes=s.nodes, pods=s.expected_pods, workloads_s=workloads_s, pods_s=pods_s,
        pass_mean_s=scrape.value(metrics, "compactor_reconcile_duration_seconds_sum")
        / max(count, 1),
        pass_p99_s=scrape.quantile(passes, 0.99), passes_over_5s=int(count - under5),
        plan_mean_s=scrape.value(metrics, "compactor_plan_duration_seconds_sum") / max(
            plans[-1][1] if plans else 1, 1),
        plan_p99_s=scrape.quantile(plans, 0.99),
        controller_rss_mib=peak_rss_mib(cluster.process("compactor-controller").pid),
        webhook_rss_mib=peak_rss_mib(hook.process.pid),
        controller_rpm=(c1 - c0) * per_min, controller_watch_rpm=(cw1 - cw0) * per_min,
        webhook_rpm=(w1 - w0) * per_min,
        apiserver_rpm=(a1 - a0) * per_min,
        throttled=int(stack.controller_metric("compactor_controller_api_throttled")),
        apf_rejected=int(scrape.value(server, "apiserver_flowcontrol_rejected_requests_total")),
        events_per_pass=(e1 - e0) / max(p1 - p0, 1.0))


def _controller_metrics(stack: CompactorStack) -> str:
    return httpx.get(f"http://127.0.0.1:{stack.metrics_port}/metrics", timeout=5).text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100,300,500", help="node counts, comma-separated")
    parser.add_argument("--steady-seconds", type=float, default=120.0)
    parser.add_argument("--patch-concurrency", type=int, default=None,
                        help="COMPACTOR_CONTROLLER_PATCH_CONCURRENCY for the controller")
    parser.add_argument("--nodes-per-mix", type=int, default=NODES_PER_MIX,
                        help="one copy of the demo's mix per this many nodes (0: one copy at"
                        " every size, its replicas scaled)")
    parser.add_argument("--compaction-nodes", type=int, default=100,
                        help="then compact the demo's mix on this many nodes (0: skip)")
    args = parser.parse_args()
    if args.patch_concurrency:
        os.environ["COMPACTOR_CONTROLLER_PATCH_CONCURRENCY"] = str(args.patch_concurrency)
    runs = []
    for nodes in sorted(int(n) for n in args.sizes.split(",") if n):
        runs.append(measure(nodes, args.steady_seconds, args.nodes_per_mix or nodes))
        print(table(runs), flush=True)
    checks = verdicts(runs) if runs else []
    sections = [table(runs), cpu_table(runs)] if runs else []
    if args.compaction_nodes:
        compacted = [(args.compaction_nodes, compaction_scale.measure(args.compaction_nodes))]
        checks += compaction_scale.verdicts(compacted)
        sections.append(compaction_scale.table(compacted))
    print("\n" + "\n\n".join(sections) + "\n")
    for name, ok, detail in checks:
        print(f"{'PASS' if ok else 'FAIL'}: {name} ({detail})")
    out = Path(__file__).resolve().parents[2] / "loadtest" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench-e2e.md").write_text("\n\n".join(sections) + "\n\n" + "\n".join(
        f"{'PASS' if ok else 'FAIL'}: {n} ({d})" for n, ok, d in checks) + "\n")
    raise SystemExit(0 if all(ok for _, ok, _ in checks) else 1)


if __name__ == "__main__":
    main()
