"""What the policies would free on a cluster, as ``kubectl compactor plan`` shows it. Pure.

The preview decides nothing of its own: it hands the ``Snapshot`` the controller would read to
the controller's own pass (``controller.plan.decide.drain_plans``: the pass up to its drain plan,
the rest being writes the preview never makes) and reports the drain plans it returns: the nodes
they free in the order they would drain them, why every other node in use stays (grouped by
reason code), how far that is from the best packing of the same requests
(``compaction.packing``), the Pods that would move, and what the freed nodes cost.
``kubectl_compactor.cli`` does the reading and the printing.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from compaction import names, quantity
from compaction.packing import bounds_per_resource, ffd
from compaction.problem import Problem
from compaction.safety import is_placeholder
from controller.components.pod_settings import RuntimeSettings
from controller.drain_planner.drain_plan import DrainPlan
from controller.drain_planner.reasons import CAUSES, Code, Reason
from controller.plan.decide import drain_plans
from controller.plan.settings import PlanSettings
from controller.snapshot.pod import PodInfo
from controller.snapshot.policies import (
    EvaluationInfo,
    PolicyInfo,
    parse_evaluation_info,
    parse_policy_info,
)
from controller.snapshot.snapshot import Snapshot

API_VERSION: Final = names.API_VERSION
HOURS_PER_MONTH: Final = 730
INSTANCE_TYPE_LABEL: Final = "node.kubernetes.io/instance-type"
RESOURCES: Final = ("cpu", "memory", "pods")



def settings() -> PlanSettings:
    """The controller's defaults: what ``plan`` decides with when nothing is configured."""
    return PlanSettings(RuntimeSettings())


# --- policies -------------------------------------------------------------------------


@dataclass(frozen=True)
class Policies:
    """The policies to judge (from files or from the cluster), and what is wrong with them."""

    policies: tuple[PolicyInfo, ...] = ()
    evaluation: EvaluationInfo | None = None
    problems: tuple[str, ...] = ()  # one line each: where, which object, field path, message


def _problem_lines(source: str, what: str, problems: Iterable[Problem]) -> list[str]:
    return [f"{source}: {what}: {p.path}: {p.message}" for p in problems]


def read_documents(documents: Iterable[tuple[str, Any]]) -> Policies:
    """Policies (and a PolicyEvaluation) from YAML documents, each with where it came from
    (``file#n``), through the controller's validation; every problem with its field path."""
    policies: list[PolicyInfo] = []
    evaluation: EvaluationInfo | None = None
    problems: list[str] = []
    for source, doc in documents:
        if doc is None:
            continue  # an empty document between two ---
        if not isinstance(doc, Mapping):
            problems.append(f"{source}: (document): is a {type(doc).__name__}, not an object")
            continue
        kind = doc.get("kind")
        raw_meta = doc.get("metadata")
        meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
        what = f"{kind or '(no kind)'}/{meta.get('name') or '(no name)'}"
        version_problems = [] if doc.get("apiVersion") == API_VERSION else [
            Problem("apiVersion", f"must be {API_VERSION}")]
        if kind == names.EVALUATION_KIND:
            found = parse_evaluation_info(doc)
            problems += _problem_lines(source, what, [*version_problems, *found.problems])
            evaluation = found
            continue
        if kind == names.NAMESPACED_POLICY_KIND and not meta.get("namespace"):
            # As kubectl apply would: the default namespace.
            doc = {**doc, "metadata": {**meta, "namespace": "default"}}
        found_policy = parse_policy_info(doc)
        problems += _problem_lines(source, what,
                                   [*version_problems, *found_policy.problems])
        policies.append(found_policy)
    return Policies(tuple(policies), evaluation, tuple(problems))


def cluster_policies(snapshot: Snapshot) -> Policies:
    """The cluster's own policies and PolicyEvaluation, with their problems."""
    problems: list[str] = []
    for p in snapshot.policies:
        problems += _problem_lines("cluster", f"{p.kind}/{p.id}", p.problems)
    if snapshot.evaluation is not None:
        problems += _problem_lines("cluster", f"{names.EVALUATION_KIND}/"
                                   f"{names.EVALUATION_NAME}", snapshot.evaluation.problems)
    return Policies(snapshot.policies, snapshot.evaluation, tuple(problems))


def with_policies(snapshot: Snapshot, chosen: Policies) -> Snapshot:
    """The snapshot as the controller would read it with ``chosen`` applied."""
    return dataclasses.replace(snapshot, policies=chosen.policies,
                               evaluation=chosen.evaluation or snapshot.evaluation)


# --- prices ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Prices:
    """Hourly prices: per instance type (the node's ``node.kubernetes.io/instance-type``),
    else a flat one per node."""

    by_type: Mapping[str, float] = field(default_factory=dict)
    per_node: float | None = None

    @property
    def given(self) -> bool:
        return bool(self.by_type) or self.per_node is not None

    def hourly(self, labels: Mapping[str, str]) -> float | None:
        kind = labels.get(INSTANCE_TYPE_LABEL)
        if kind is not None and kind in self.by_type:
            return self.by_type[kind]
        return self.per_node


def parse_prices(raw: Any, source: str) -> tuple[dict[str, float], list[str]]:
    """A price file: a mapping of instance type to hourly price."""
    if not isinstance(raw, Mapping):
        return {}, [f"{source}: must map instance types to hourly prices"]
    out: dict[str, float] = {}
    problems = []
    for kind, price in raw.items():
        if isinstance(price, bool) or not isinstance(price, int | float) or price < 0:
            problems.append(f"{source}: {kind}: the hourly price must be a number >= 0")
        else:
            out[str(kind)] = float(price)
    return out, problems


@dataclass(frozen=True)
class Savings:
    monthly: float  # of the freed nodes that have a price, for 730 h
    priced: int
    unpriced: tuple[str, ...]  # freed nodes without a price


# --- the report -----------------------------------------------------------------------


@dataclass(frozen=True)
class Held:
    """Nodes in use that stay, for one cause."""

    code: Code
    cause: str
    nodes: tuple[str, ...]
    example: str  # one reason's own text


@dataclass(frozen=True)
class Freed:
    node: str
    evictions: int  # Pods evicted from it (placeholders move without one)
    pods: int  # Pods that leave it
    hourly: float | None = None


@dataclass(frozen=True)
class Unsimulated:
    pod: str
    node: str
    reason: str


@dataclass(frozen=True)
class Bounds:
    nodes_after: int  # in use - freeable
    lower_bound: int  # sum of requests / node capacity, the largest over the resources
    per_resource: Mapping[str, int]
    ffd: int  # a first-fit-decreasing packing of every request
    capacity: Mapping[str, int]  # what one node offers the Pods (milli-units)


@dataclass(frozen=True)
class Report:
    policies: tuple[str, ...]
    nodes: int
    in_use: tuple[str, ...]
    empty: tuple[str, ...]  # nothing but DaemonSet or mirror Pods
    freeable: tuple[Freed, ...]  # in the order they would be drained
    stays: Mapping[str, tuple[Reason, ...]]  # every other node in use, with its reasons
    held: tuple[Held, ...]  # the same, grouped by reason code, most nodes first
    bounds: Bounds
    unsimulated: tuple[Unsimulated, ...]
    savings: Savings | None

    @property
    def pods_to_move(self) -> int:
        return sum(f.pods for f in self.freeable)

    @property
    def evictions(self) -> int:
        return sum(f.evictions for f in self.freeable)


def preview_drains(snapshot: Snapshot, now: datetime.datetime) -> tuple[DrainPlan, ...]:
    """The drains the controller's pass would plan from this snapshot, with its default
    settings."""
    return drain_plans(snapshot, settings(), now)


def _workload_pod(pod: PodInfo) -> bool:
    return pod.occupies and not (pod.daemon or pod.mirror)


def merge_in_order(lists: Iterable[Sequence[str]]) -> list[str]:
    """The union of lists that are each in one common order (each policy's freeable nodes in
    plan order), in that order: every pair a list orders stays so; the rest by first sight."""
    seen: dict[str, int] = {}
    after: dict[str, set[str]] = defaultdict(set)
    before: dict[str, int] = defaultdict(int)
    for items in lists:
        for i, name in enumerate(items):
            seen.setdefault(name, len(seen))
            if i and name not in after[items[i - 1]]:
                after[items[i - 1]].add(name)
                before[name] += 1
    ready = sorted((n for n in seen if not before[n]), key=seen.__getitem__)
    out: list[str] = []
    while ready:
        name = ready.pop(0)
        out.append(name)
        for nxt in after[name]:
            before[nxt] -= 1
            if not before[nxt]:
                ready.append(nxt)
        ready.sort(key=seen.__getitem__)
    return out


def _reasons(drains: Sequence[DrainPlan]) -> dict[str, list[Reason]]:
    out: dict[str, list[Reason]] = defaultdict(list)
    for d in drains:
        for u in (*d.abandoned, *d.unremovable):
            out[u.node] += [r for r in u.reasons if r not in out[u.node]]
        for name in d.drained:
            out[name].append(Reason(Code.DRAINED, "drained: what is left there never moves"))
    return out


def group(stays: Mapping[str, Sequence[Reason]]) -> tuple[Held, ...]:
    """Nodes per reason code (a node with several counts under each), most nodes first."""
    nodes: dict[Code, list[str]] = defaultdict(list)
    example: dict[Code, str] = {}
    for name, reasons in sorted(stays.items()):
        for r in reasons:
            if name not in nodes[r.code]:
                nodes[r.code].append(name)
                example.setdefault(r.code, r.text)
    return tuple(Held(code, CAUSES[code], tuple(ns), example[code])
                 for code, ns in sorted(nodes.items(), key=lambda kv: (-len(kv[1]), kv[0])))


def bounds(pods: Iterable[PodInfo], snapshot: Snapshot, in_use: Sequence[str],
           freeable: int) -> Bounds:
    """The packing bounds of every workload Pod's requests, on nodes of the largest capacity
    in use left after its DaemonSet and mirror Pods (a true lower bound on nodes of that
    size; a cluster of mixed sizes needs at least as many)."""
    allocatable = {n.name: n.allocatable for n in snapshot.nodes}
    fixed: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(RESOURCES, 0))
    items = []
    for p in pods:
        if not p.occupies or p.node_name not in allocatable:
            continue
        if p.daemon or p.mirror:
            used = fixed[p.node_name]
            for r in RESOURCES:
                used[r] += quantity.UNIT if r == "pods" else p.requests.get(r, 0)
        else:
            items.append(tuple(quantity.UNIT if r == "pods" else p.requests.get(r, 0)
                               for r in RESOURCES))
    capacity = {r: max((allocatable[n].get(r, 0) - fixed[n][r] for n in in_use
                        if n in allocatable), default=0) for r in RESOURCES}
    vector = tuple(max(capacity[r], 0) for r in RESOURCES)
    per = bounds_per_resource(items, vector) if items else [0] * len(RESOURCES)
    return Bounds(len(in_use) - freeable, max(per, default=0), dict(zip(RESOURCES, per,
                                                                        strict=True)),
                  ffd(items, vector) if items else 0, capacity)


def build(snapshot: Snapshot, drains: Sequence[DrainPlan], prices: Prices = Prices()
          ) -> Report:
    """The report of the controller's ``drains`` of ``snapshot``."""
    by_node: dict[str, list[PodInfo]] = defaultdict(list)
    for p in snapshot.pods:
        if _workload_pod(p):
            by_node[p.node_name].append(p)
    known = {n.name: n for n in snapshot.nodes}
    in_use = tuple(n.name for n in snapshot.nodes if by_node.get(n.name))
    empty = tuple(n.name for n in snapshot.nodes if not by_node.get(n.name))
    order = merge_in_order(d.freeable for d in drains)
    moves = {k for d in drains for k in d.moves}
    freed = []
    for name in order:
        leaving = [p for p in by_node.get(name, ()) if p.key in moves]
        node = known.get(name)
        freed.append(Freed(name, sum(not is_placeholder(p.priority) for p in leaving),
                           len(leaving), prices.hourly(node.labels) if node else None))
    reasons = _reasons(drains)
    stays: dict[str, tuple[Reason, ...]] = {}
    for name in in_use:
        if name in order:
            continue
        stays[name] = tuple(reasons.get(name) or [Reason(
            Code.NO_POOL if drains else Code.NO_POLICY,
            "node is in no policy's node pool" if drains else
            "no enabled policy to judge the node")])
    unsimulated = tuple(
        Unsimulated(f"{p.namespace}/{p.name}", p.node_name, p.constraints.unsimulated)
        for name in in_use for p in by_node[name] if p.constraints.unsimulated)
    savings = None
    if prices.given:
        priced = [f.hourly for f in freed if f.hourly is not None]
        savings = Savings(sum(priced) * HOURS_PER_MONTH, len(priced),
                          tuple(f.node for f in freed if f.hourly is None))
    return Report(
        tuple(d.policy for d in drains), len(snapshot.nodes), in_use, empty,
        tuple(freed), stays, group(stays),
        bounds(snapshot.pods, snapshot, in_use, len(freed)), unsimulated, savings)


@dataclass(frozen=True)
class NodeLoad:
    """One node's requested CPU (millicores) and memory (bytes), before the plan and with its
    moves applied, and what it offers."""

    node: str
    cpu_before: int
    cpu_after: int
    memory_before: int
    memory_after: int
    cpu_allocatable: int
    memory_allocatable: int


def loads(snapshot: Snapshot, drains: Sequence[DrainPlan]) -> tuple[NodeLoad, ...]:
    """Per node (in the snapshot's order), the requests of every Pod that occupies it, before
    and after the plan's moves (a moved Pod counts on the node the simulation put it on)."""
    moves = {k: v for d in drains for k, v in d.moves.items()}
    before: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    after: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for p in snapshot.pods:
        if not p.occupies or not p.node_name:
            continue
        cpu, memory = p.requests.get("cpu", 0), p.requests.get("memory", 0) // 1000
        for side, name in ((before, p.node_name), (after, moves.get(p.key, p.node_name))):
            side[name][0] += cpu
            side[name][1] += memory
    return tuple(NodeLoad(n.name, before[n.name][0], after[n.name][0], before[n.name][1],
                          after[n.name][1], n.allocatable.get("cpu", 0),
                          n.allocatable.get("memory", 0) // 1000) for n in snapshot.nodes)


# --- output ---------------------------------------------------------------------------


def as_dict(report: Report) -> dict[str, Any]:
    """The report for ``-o json|yaml``: plain data, stable keys."""
    b = report.bounds
    return {
        "policies": list(report.policies),
        "nodes": report.nodes,
        "nodesInUse": list(report.in_use),
        "emptyNodes": list(report.empty),
        "freeable": [{"node": f.node, "podsToMove": f.pods, "evictions": f.evictions,
                      "hourlyPrice": f.hourly} for f in report.freeable],
        "stays": {name: [{"code": r.code, "reason": r.text} for r in rs]
                  for name, rs in report.stays.items()},
        "heldBy": [{"code": h.code, "cause": h.cause, "count": len(h.nodes),
                    "nodes": list(h.nodes), "example": h.example} for h in report.held],
        "nodesAfter": b.nodes_after,
        "lowerBound": b.lower_bound,
        "lowerBoundPerResource": dict(b.per_resource),
        "ffdPacking": b.ffd,
        "nodeCapacity": {r: _quantity(r, v) for r, v in b.capacity.items()},
        "podsToMove": report.pods_to_move,
        "evictions": report.evictions,
        "unsimulated": [{"pod": u.pod, "node": u.node, "reason": u.reason}
                        for u in report.unsimulated],
        "savings": None if report.savings is None else {
            "monthly": round(report.savings.monthly, 2), "hoursPerMonth": HOURS_PER_MONTH,
            "pricedNodes": report.savings.priced,
            "unpricedNodes": list(report.savings.unpriced)},
    }


def _quantity(resource: str, milli: int) -> str:
    if resource == "pods":
        return str(milli // quantity.UNIT)
    if resource == "memory":
        return f"{milli // 1000 // 2**20}Mi"
    return f"{milli}m" if resource == "cpu" else str(milli // 1000)


def _names(nodes: Sequence[str], most: int = 5) -> str:
    shown = ", ".join(nodes[:most])
    return shown + (f", … ({len(nodes) - most} more)" if len(nodes) > most else "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def text(report: Report) -> str:
    """The report for a person."""
    b = report.bounds
    lines = [
        f"Policies judged: {', '.join(report.policies) or '(none enabled)'}",
        f"Nodes in use: {len(report.in_use)} of {report.nodes}"
        + (f" ({_plural(len(report.empty), 'node')} run only DaemonSet or mirror Pods)"
           if report.empty else ""),
        "",
        f"Could free {_plural(len(report.freeable), 'node')}"
        + (", in the order they would be drained:" if report.freeable else "."),
    ]
    for i, f in enumerate(report.freeable, 1):
        price = f", ${f.hourly * HOURS_PER_MONTH:,.2f}/month" if f.hourly is not None else ""
        lines.append(f"  {i}. {f.node}: {_plural(f.pods, 'Pod')} to move, "
                     f"{_plural(f.evictions, 'eviction')}{price}")
    lines += ["", f"Nodes that stay: {len(report.stays)}"]
    for h in report.held:
        lines.append(f"  {_plural(len(h.nodes), 'node')} held by: {h.cause} ({h.code})")
        lines.append(f"      {_names(h.nodes)}; e.g. {h.example}")
    per = ", ".join(f"{r} {n}" for r, n in b.per_resource.items())
    lines += [
        "",
        f"Nodes after: {b.nodes_after} (in use {len(report.in_use)} - freeable "
        f"{len(report.freeable)})",
        f"  lower bound: {b.lower_bound} (requests / node capacity: {per})",
        f"  first-fit-decreasing packing of all requests: {b.ffd}",
        f"Pods to move: {report.pods_to_move} ({_plural(report.evictions, 'eviction')})",
    ]
    if report.unsimulated:
        lines.append(f"Not simulated: {_plural(len(report.unsimulated), 'Pod')} "
                     "(their nodes are judged as if they could not move)")
        lines += [f"  {u.pod} on {u.node}: {u.reason}" for u in report.unsimulated]
    s = report.savings
    if s is not None:
        unpriced = (f"; {_plural(len(s.unpriced), 'freed node')} without a price: "
                    f"{_names(s.unpriced)}" if s.unpriced else "")
        lines.append(f"Savings: ${s.monthly:,.2f}/month ({HOURS_PER_MONTH} h) for "
                     f"{_plural(s.priced, 'priced node')}{unpriced}")
    return "\n".join(lines)
