"""What would free more: each thing a user can change that keeps nodes in use, with the nodes
the plan would free were that one thing relaxed. Pure.

The levers are what a user owns: a PodDisruptionBudget that allows 0 disruptions, a
workload's protection annotation (safe-to-evict "false", karpenter.sh/do-not-disrupt), a
policy's thresholds, ``maxEvictionsToFreeNode`` and ``maxDrainingNodes``, and kube-system's
Pods left on the nodes the workloads use (the ComputeClass reference's advice: give them a
pool of their own). Compactor's own rules are no lever: the install namespace, DaemonSet and
mirror Pods, a Pod under two budgets. kube-system's protection stays too: the lever moves
its Pods to their own pool, it never evicts them.

Ranked in one pass over the reasons the plan already gives each kept node (a node counts
for a lever when every reason it stays is that lever's), then the first few planned again in
full by the controller's planner with that lever lifted in its inputs
(``controller.plan.decide.Lift``): the figures given are those of the plans, not guesses.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final

from compaction import names, quantity
from compaction.packing import ffd
from compaction.policy import DeschedulerSpec, Policy, Thresholds
from compaction.safety import UNSAFE_TO_EVICT
from controller.drain_planner.drain_plan import DrainPlan
from controller.drain_planner.reasons import Code, Reason
from controller.plan.decide import Lift
from controller.snapshot.pod import PodInfo
from controller.snapshot.snapshot import Snapshot
from kubectl_compactor.inputs import NO_PRICES, Prices

# Levers planned again in full. Each costs about one plan, about 15 % of the whole preview's
# wall time at 5,000 nodes: three stay within the 50 % the counterfactual may add.
TOP: Final = 3
HOURS_PER_MONTH: Final = 730
SYSTEM_NAMESPACE: Final = "kube-system"
RESOURCES: Final = ("cpu", "memory", "pods")


class Kind(StrEnum):
    PDB = "PodDisruptionBudget"
    ANNOTATION = "annotation"
    SYSTEM_PODS = "systemPods"
    THRESHOLDS = "thresholds"
    MAX_EVICTIONS = "maxEvictionsToFreeNode"
    MAX_DRAINING = "maxDrainingNodes"


@dataclass(frozen=True, order=True)
class Lever:
    """One thing a user can change: its kind and what it names (a budget's
    ``namespace/name``, a workload's ``Kind namespace/name``, a policy's id, a namespace)."""

    kind: Kind
    target: str
    annotation: str = ""  # the annotation, for Kind.ANNOTATION


@dataclass(frozen=True)
class Candidate:
    """A lever and the kept nodes it holds: alone (the estimate), or beside other reasons."""

    lever: Lever
    alone: tuple[str, ...]
    touches: tuple[str, ...]


@dataclass(frozen=True)
class Relaxed:
    """A lever, what to change, and what it frees more: ``more`` and ``nodes`` from the plan
    made again with it lifted (None and () beyond the first few, which are estimated only)."""

    lever: Lever
    change: str
    estimate: int
    more: int | None
    nodes: tuple[str, ...] = ()  # freed with the lever lifted, not without
    monthly: float | None = None  # what ``more`` saves a month, with prices given
    pool_nodes: int = 0  # the nodes a pool of its own takes (system Pods)

    @property
    def net(self) -> int:
        return (self.more or 0) - self.pool_nodes


_PREFIX: Final = re.compile(r"^policy (\S+): ")
_PDB: Final = re.compile(r"PodDisruptionBudget (\S+) allows 0")
_POD: Final = re.compile(r"^pod (\S+?)/(\S+)")
_ANNOTATION: Final = {Code.SAFE_TO_EVICT: names.SAFE_TO_EVICT_ANNOTATION,
                      Code.DO_NOT_DISRUPT: names.DO_NOT_DISRUPT_ANNOTATION}


def workload_of(pod: PodInfo, owners: Mapping[tuple[str, str, str], tuple[str, str] | None]
                ) -> str:
    """``Kind namespace/name`` of the workload a Pod belongs to: its controller, or that
    controller's own (a ReplicaSet's Deployment, a Job's CronJob)."""
    if pod.owner is None:
        return f"Pod {pod.namespace}/{pod.name}"
    kind, name = pod.owner
    up = owners.get((kind, pod.namespace, name))
    if up is not None:
        kind, name = up
    return f"{kind} {pod.namespace}/{name}"


def lever_of(reason: Reason, policies: Sequence[str],
             workload: Callable[[str, str], str | None]) -> Lever | None:
    """The lever that would lift ``reason``; None for a rule Compactor never relaxes or a
    reason no setting lifts (a destination, a Pod that fits nowhere). ``policies``: those
    judging the node; ``workload``: a Pod's workload by namespace and name."""
    text = reason.text
    prefixed = _PREFIX.match(text)
    policy = prefixed.group(1) if prefixed else policies[0] if len(policies) == 1 else None
    if reason.code is Code.PDB and (m := _PDB.search(text)):
        return Lever(Kind.PDB, m.group(1))
    if reason.code in _ANNOTATION and (m := _POD.match(text)):
        owner = workload(m.group(1), m.group(2))
        return Lever(Kind.ANNOTATION, owner, _ANNOTATION[reason.code]) if owner else None
    if reason.code is Code.PROTECTED_NAMESPACE and (m := _POD.match(text)):
        return Lever(Kind.SYSTEM_PODS, SYSTEM_NAMESPACE) if m.group(1) == SYSTEM_NAMESPACE \
            else None
    if reason.code is Code.ABOVE_THRESHOLDS and policy:
        return Lever(Kind.THRESHOLDS, policy)
    if reason.code is Code.EVICTION_COST and policy:
        return Lever(Kind.MAX_EVICTIONS, policy)
    return None


def candidates(stays: Mapping[str, Sequence[Reason]],
               policies_of: Mapping[str, Sequence[str]],
               workload: Callable[[str, str], str | None],
               waiting: Mapping[str, Sequence[str]] | None = None) -> list[Candidate]:
    """Every lever holding a kept node, most nodes held alone first, then most held at all.
    ``waiting``: per policy whose ``maxDrainingNodes`` holds drains back, the freeable nodes
    that wait for a later pass."""
    alone: dict[Lever, list[str]] = defaultdict(list)
    touches: dict[Lever, list[str]] = defaultdict(list)
    for node, reasons in sorted(stays.items()):
        levers = [lever_of(r, policies_of.get(node, ()), workload) for r in reasons]
        for lever in dict.fromkeys(x for x in levers if x is not None):
            touches[lever].append(node)
        if levers and levers[0] is not None and all(x == levers[0] for x in levers):
            alone[levers[0]].append(node)
    for policy, nodes in (waiting or {}).items():
        touches[Lever(Kind.MAX_DRAINING, policy)] = list(nodes)
    found = [Candidate(lever, tuple(alone[lever]), tuple(nodes))
             for lever, nodes in touches.items()]
    return sorted(found, key=lambda c: (-len(c.alone), -len(c.touches), c.lever))


def waiting_drains(drains: Sequence[DrainPlan], policies: Mapping[str, Policy]
                   ) -> dict[str, tuple[str, ...]]:
    """Per policy whose first pass drains all ``maxDrainingNodes`` allows while more are
    freeable: the freeable nodes left for later passes."""
    out = {}
    for d in drains:
        p = policies.get(d.policy)
        if p is not None and len(d.draining) >= p.descheduler.max_draining_nodes:
            later = tuple(n for n in d.freeable if n not in d.draining)
            if later:
                out[d.policy] = later
    return out


def _used(snapshot: Snapshot, nodes: Iterable[str]) -> dict[str, float]:
    """The highest use, in percent of allocatable, of each resource on ``nodes``: every Pod
    that occupies a node, as the thresholds judge it."""
    wanted = set(nodes)
    used: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(RESOURCES, 0))
    for p in snapshot.pods:
        if p.occupies and p.node_name in wanted:
            for r in RESOURCES:
                used[p.node_name][r] += quantity.UNIT if r == "pods" else p.requests.get(r, 0)
    top = dict.fromkeys(RESOURCES, 0.0)
    for n in snapshot.nodes:
        if n.name in used:
            for r in RESOURCES:
                capacity = n.allocatable.get(r, 0)
                top[r] = max(top[r], 100.0 * used[n.name][r] / capacity if capacity else 100)
    return top


def _with(policy: Policy, descheduler: DeschedulerSpec) -> Policy:
    return replace(policy, descheduler=descheduler)


def _system_pods(pods: Iterable[PodInfo]) -> list[PodInfo]:
    return [p for p in pods if p.namespace == SYSTEM_NAMESPACE and p.occupies
            and not (p.daemon or p.mirror)]


def lift(candidate: Candidate, snapshot: Snapshot, policies: Mapping[str, Policy],
         freeable: int) -> tuple[Callable[[], Lift], str]:
    """The planner's inputs with ``candidate``'s lever lifted (made when called: only the
    levers planned again need them), and the change in words."""
    lever = candidate.lever
    if lever.kind is Kind.PDB:
        return (lambda: Lift(pdbs=tuple(b for b in snapshot.pdbs
                                        if f"{b.namespace}/{b.name}" != lever.target)),
                "let it allow disruptions (it allows 0 now)")
    if lever.kind is Kind.ANNOTATION:
        owners = _owners(snapshot)

        def lifted(p: PodInfo) -> PodInfo:
            if lever.annotation not in p.annotations or workload_of(p, owners) != lever.target:
                return p
            return replace(p, annotations={k: v for k, v in p.annotations.items()
                                           if k != lever.annotation})
        value = "/".join(sorted(UNSAFE_TO_EVICT)) if lever.annotation == \
            names.SAFE_TO_EVICT_ANNOTATION else "true"
        return (lambda: Lift(pods=tuple(map(lifted, snapshot.pods))),
                f"remove {lever.annotation} ({value}) from its Pods")
    if lever.kind is Kind.SYSTEM_PODS:
        moved = {p.key for p in _system_pods(snapshot.pods)}
        return (lambda: Lift(pods=tuple(p for p in snapshot.pods if p.key not in moved)),
                f"run its {len(moved)} Pods (DaemonSets aside) on a node pool of their own")
    policy = policies[lever.target]
    d = policy.descheduler
    if lever.kind is Kind.THRESHOLDS:
        t = d.high_node_utilization.thresholds
        need = _used(snapshot, candidate.touches)
        raised = Thresholds(*(min(100.0, max(old, float(math.ceil(need[r]))))
                              for r, old in zip(RESOURCES, (t.cpu, t.memory, t.pods),
                                                strict=True)))
        hot = _with(policy, replace(d, high_node_utilization=replace(
            d.high_node_utilization, thresholds=raised)))
        return (lambda: Lift(policies={policy.id: hot}),
                f"raise policy {policy.id}'s thresholds to cpu {raised.cpu:g}%, memory "
                f"{raised.memory:g}%, pods {raised.pods:g}% (now {t.cpu:g}%, {t.memory:g}%, "
                f"{t.pods:g}%)")
    if lever.kind is Kind.MAX_EVICTIONS:
        unlimited = replace(d, max_evictions_to_free_node=None)
        return (lambda: Lift(policies={policy.id: _with(policy, unlimited)}),
                f"raise policy {policy.id}'s maxEvictionsToFreeNode "
                f"(now {d.max_evictions_to_free_node})")
    wider = replace(d, max_draining_nodes=max(freeable, 1))
    return (lambda: Lift(policies={policy.id: _with(policy, wider)}),
            f"raise policy {policy.id}'s maxDrainingNodes from {d.max_draining_nodes} to "
            f"{max(freeable, 1)} (the forecast frees the nodes it holds back in later passes:"
            " sooner, not more)")


def _owners(snapshot: Snapshot) -> dict[tuple[str, str, str], tuple[str, str] | None]:
    return {(o.kind, o.namespace, o.name): o.controller for o in snapshot.owners}


def _pool_nodes(pods: Sequence[PodInfo], capacity: Mapping[str, int]) -> int:
    """Nodes of ``capacity`` a first-fit-decreasing packing of ``pods`` fills."""
    vector = tuple(max(capacity.get(r, 0), 0) for r in RESOURCES)
    items = [tuple(quantity.UNIT if r == "pods" else p.requests.get(r, 0) for r in RESOURCES)
             for p in pods]
    return ffd(items, vector) if items and all(vector) else 0


def _freed(plans: Sequence[DrainPlan]) -> set[str]:
    return {n for p in plans for n in p.freeable}


def relax(snapshot: Snapshot, drains: Sequence[DrainPlan],
          stays: Mapping[str, Sequence[Reason]],
          plan: Callable[[Lift], Sequence[DrainPlan]], prices: Prices = NO_PRICES,
          capacity: Mapping[str, int] | None = None, slack: int | None = None,
          top: int = TOP) -> tuple[Relaxed, ...]:
    """Every lever holding a kept node, the first ``top`` whose estimate is above 0 planned
    again by ``plan`` with it lifted, most nodes freed more first; the rest after, by their
    estimate. ``capacity``: one node's, for the pool system Pods would need; ``slack``: the
    nodes after the plan less the packing's lower bound, the most a lever that keeps every
    Pod can free more (it caps the estimates)."""
    policies = {p.acting.id: p.acting for p in snapshot.policies if p.acting is not None}
    policies_of: dict[str, list[str]] = defaultdict(list)
    for d in drains:
        for u in d.unremovable:
            policies_of[u.node].append(d.policy)
    pods: dict[tuple[str, str], PodInfo] | None = None
    owners = _owners(snapshot)

    def workload(namespace: str, name: str) -> str | None:
        nonlocal pods
        if pods is None:
            pods = {p.key: p for p in snapshot.pods}
        found = pods.get((namespace, name))
        return workload_of(found, owners) if found is not None else None

    ranked = [c for c in candidates(stays, policies_of, workload,
                                    waiting_drains(drains, policies))
              if c.lever.kind in (Kind.PDB, Kind.ANNOTATION, Kind.SYSTEM_PODS)
              or c.lever.target in policies]
    estimates = [estimate(c, slack) for c in ranked]
    order = sorted(range(len(ranked)), key=lambda i: -estimates[i])
    ranked, estimates = [ranked[i] for i in order], [estimates[i] for i in order]
    before = _freed(drains)
    hourly = {n.name: prices.hourly(n.labels) for n in snapshot.nodes} if prices.given else {}
    out = []
    for i, c in enumerate(ranked):
        lifted, change = lift(c, snapshot, policies, len(before))
        if i >= top or not estimates[i]:
            out.append(Relaxed(c.lever, change, estimates[i], None))
            continue
        after = plan(lifted())
        gained = sorted(_freed(after) - before)
        more = len(_freed(after)) - len(before)
        monthly = None
        if prices.given:
            monthly = HOURS_PER_MONTH * (sum(hourly.get(n) or 0 for n in _freed(after))
                                         - sum(hourly.get(n) or 0 for n in before))
        pool = (_pool_nodes(_system_pods(snapshot.pods), capacity or {})
                if c.lever.kind is Kind.SYSTEM_PODS else 0)
        if c.lever.kind is Kind.MAX_EVICTIONS and gained:
            cost = max(p.costs.get(n, 0) for p in after for n in gained)
            change = change.replace("(now", f"to {cost} (now")
        out.append(Relaxed(c.lever, change, estimates[i], more, tuple(gained), monthly, pool))
    planned = sorted((r for r in out if r.more is not None),
                     key=lambda r: (-r.net, -r.estimate, r.lever))
    return (*planned, *(r for r in out if r.more is None))


def estimate(candidate: Candidate, slack: int | None) -> int:
    """The nodes a lever alone holds, at most ``slack`` unless it takes Pods away (system
    Pods moved to a pool of their own): a plan that keeps every Pod ends at or above the
    packing's lower bound."""
    alone = len(candidate.alone)
    if slack is None or candidate.lever.kind is Kind.SYSTEM_PODS:
        return alone
    return min(alone, max(slack, 0))
