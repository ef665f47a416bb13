"""What the policies would free on a cluster, as ``kubectl compactor plan`` shows it. Pure.

The preview decides nothing of its own: it hands the ``Snapshot`` the controller would read to
the controller's own pass (``controller.plan.decide.drain_plans``: the pass up to its drain plan,
the rest being writes the preview never makes) and reports the drain plans it returns: the nodes
they free in the order they would drain them, why every other node in use stays (grouped by
reason code), how far that is from the best packing of the same requests
(``compaction.packing``), the Pods that would move, and what the freed nodes cost.
``cluster_read`` and ``inputs`` read, ``render`` prints.
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from compaction import quantity
from compaction.packing import bounds_per_resource, ffd
from controller.components.pod_settings import RuntimeSettings
from controller.drain_planner.drain_plan import DrainPlan
from controller.drain_planner.reasons import CAUSES, Code, Reason
from controller.plan.decide import Lift, drain_planner, drain_plans
from controller.plan.settings import PlanSettings
from controller.snapshot.pod import PodInfo
from controller.snapshot.snapshot import Snapshot
from kubectl_compactor.counterfactual import Relaxed
from kubectl_compactor.inputs import NO_PRICES, Prices

HOURS_PER_MONTH: Final = 730
RESOURCES: Final = ("cpu", "memory", "pods")



def settings() -> PlanSettings:
    """The controller's defaults: what ``plan`` decides with when nothing is configured."""
    return PlanSettings(RuntimeSettings())


# --- policies -------------------------------------------------------------------------


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
    evictions: int  # what freeing it costs, as the plan counts it (``DrainPlan.costs``)
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
    # What relaxing each lever would free more (``counterfactual``); None: not asked for.
    counterfactual: tuple[Relaxed, ...] | None = None

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


def preview_planner(snapshot: Snapshot, now: datetime.datetime
                    ) -> Callable[[Lift], tuple[DrainPlan, ...]]:
    """``preview_drains`` with the planner's inputs lifted (``Lift()``: the same drains)."""
    return drain_planner(snapshot, settings(), now)


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


def build(snapshot: Snapshot, drains: Sequence[DrainPlan], prices: Prices = NO_PRICES
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
    costs = {n: c for d in drains for n, c in d.costs.items()}
    freed = []
    for name in order:
        leaving = [p for p in by_node.get(name, ()) if p.key in moves]
        node = known.get(name)
        freed.append(Freed(name, costs.get(name, 0),
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



