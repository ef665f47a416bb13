"""Which nodes each policy can empty, simulated before anything is evicted. Pure.

A node is a candidate only if every Pod on it that must keep running can be placed on the
other nodes, placed as the compaction scheduler would place it (MostAllocated on requests)
and within what each destination holds already, the Pods planned onto it included.
DaemonSet and mirror Pods never block; placeholders (priority at or below -10) must fit
elsewhere like any Pod but are never evicted (the Cluster Autoscaler removes a node that runs
only those). A Pod that cannot move blocks its node, and the node's reasons say which and
why. Candidates are tried the way the peers try them, fewest Pods and least requested first,
within the policy's node pool and thresholds; a budget bounds how many drain at once.

The planner only decides. Its drains are carried out by tainting the nodes
``compactor.dev/drain=<policy>:PreferNoSchedule``, which the compaction scheduler avoids and
the policy's descheduler (``RemovePodsViolatingNodeTaints``) evicts from.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from compaction import names
from compaction.policy import DeschedulerSpec, Policy
from compaction.quantity import add, format_milli
from compaction.safety import evictable_kinds, is_placeholder, unsafe_to_evict
from compaction.selector import LabelSelector
from compaction.utilization import Utilization, is_underutilized
from compaction.workload import WorkloadType
from controller.convergence import SYSTEM_CRITICAL
from controller.objects import parse_time
from controller.scheduling import UNCONSTRAINED, Effect, Taint, most_allocated, tolerated
from controller.snapshot import NodeInfo, PdbInfo, PodInfo

# Taints of nodes another autoscaler is removing: never a destination, never a candidate.
LEAVING_TAINTS: Final = frozenset({
    "ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler",
    "karpenter.sh/disrupted", "karpenter.sh/disruption"})
_POD: Final = 1000  # one Pod, in the milli-units of allocatable "pods"


def drain_taint(policy: str, since: datetime.datetime) -> Taint:
    return Taint(names.DRAIN_TAINT, policy, Effect.PREFER_NO_SCHEDULE,
                 since.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))


def drain_owner(node: NodeInfo) -> Taint | None:
    """Our drain taint on the node, if any (its value names the policy)."""
    return next((t for t in node.taints if t.key == names.DRAIN_TAINT), None)


@dataclass(frozen=True)
class Member:
    """What the pass decided for a Pod: its workload's kind and policy, and suppression."""

    kind: WorkloadType
    policy: str | None
    suppressed: bool


@dataclass(frozen=True)
class Reason:
    """Why a node cannot be freed: ``code`` for metrics, ``text`` for a person."""

    code: str
    text: str


@dataclass(frozen=True)
class Unremovable:
    node: str
    reasons: tuple[Reason, ...]
    stake: bool = False  # the policy has Pods it could move there


@dataclass(frozen=True)
class DrainPlan:
    """One policy's plan, as its status shows it and the taints carry it out."""

    policy: str
    nodes_in_use: tuple[str, ...] = ()  # pool nodes running a Pod other than a DaemonSet's
    freeable: tuple[str, ...] = ()  # nodes the simulation empties, in the order it drains them
    draining: tuple[str, ...] = ()  # of those, the ones to drain now: tainted
    drained: tuple[str, ...] = ()  # tainted and empty of movable Pods now: untainted
    abandoned: tuple[Unremovable, ...] = ()  # tainted, but the plan no longer holds
    unremovable: tuple[Unremovable, ...] = ()
    # Per draining node, the Pods its descheduler may evict next (they get the draining label).
    evict: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    # Where the simulation put each Pod of a freeable node: (namespace, name) -> node.
    moves: Mapping[tuple[str, str], str] = field(default_factory=dict)


@dataclass(eq=False)
class _Node:
    """A node as the simulation fills it: what is free on it and who runs there."""

    info: NodeInfo
    free: dict[str, int]  # allocatable minus every request placed here, per resource
    pods: list[PodInfo]
    repels: int = 0  # Pods here with required hostname anti-affinity
    # Pods here that keep the node in use: not a DaemonSet's, mirror or placeholder Pod (the
    # Pods not yet scheduled that the simulation gave it included).
    hosts: int = 0
    # Ready, schedulable, not leaving, not draining: it may take Pods.
    open: bool = True
    hard_taints: bool = False  # NoSchedule or NoExecute taints a Pod must tolerate
    # (-score, name): sorting by it puts the most allocated first. Kept current by
    # ``rescore`` whenever ``free`` changes, so that the orderings a plan sorts hundreds of
    # times compare stored tuples instead of recomputing every score.
    rank: tuple[float, str] = (0.0, "")

    def __post_init__(self) -> None:
        self.rescore()

    def rescore(self) -> None:
        self.rank = (-self.score(), self.info.name)

    def score(self) -> float:
        """Its MostAllocated score (cpu and memory, weight 1 each, 0-100)."""
        total, count = 0.0, 0
        for resource in ("cpu", "memory"):
            capacity = self.info.allocatable.get(resource, 0)
            if capacity > 0:
                total += 100.0 * (capacity - self.free.get(resource, 0)) / capacity
                count += 1
        return total / count if count else 0.0


def _utilization(node: _Node) -> Utilization:
    def percent(resource: str) -> float:
        capacity = node.info.allocatable.get(resource, 0)
        used = capacity - node.free.get(resource, 0)
        return 100.0 * used / capacity if capacity else 100.0
    return Utilization(percent("cpu"), percent("memory"), percent("pods"))


def _leaving(node: NodeInfo) -> bool:
    return any(t.key in LEAVING_TAINTS for t in node.taints)


def _needs(pod: PodInfo) -> dict[str, int]:
    return add(pod.requests, {"pods": _POD})


def _keeps_in_use(pod: PodInfo) -> bool:
    return not (pod.daemon or pod.mirror or is_placeholder(pod.priority))


def largest_first(pod: PodInfo) -> tuple[int, int, str]:
    """The order the simulation places a node's Pods in, as first-fit decreasing packs."""
    return (-pod.requests.get("cpu", 0), -pod.requests.get("memory", 0), pod.name)


def next_evictions(movable: Sequence[PodInfo], spec: DeschedulerSpec
                   ) -> tuple[tuple[str, str], ...]:
    """The Pods of a draining node its descheduler may evict next: the largest first, as
    many as one run evicts from a node. The simulation placed them in that order; evicted in
    another, a small Pod takes the room a larger one was planned into, the larger fits
    nowhere and the drain no longer holds. Each pass marks the next ones."""
    count = max(1, min(spec.max_pods_to_evict_per_node, spec.max_pods_to_evict_total))
    return tuple(p.key for p in sorted(movable, key=largest_first)[:count])


class _Cluster:
    """Nodes with what they hold, and the Pods planned onto them so far.

    Built for speed: a move keeps an undo log instead of copying the cluster, resources are
    compared in place, and a Pod with no placement constraints tries the destinations in
    their MostAllocated order and takes the first that fits (for nodes of one shape that is
    the node kube-scheduler would score highest).
    """

    def __init__(self, nodes: Iterable[NodeInfo], pods: Iterable[PodInfo]) -> None:
        self.nodes: dict[str, _Node] = {}
        for n in nodes:
            self.nodes[n.name] = _Node(
                n, dict(n.allocatable), [],
                open=(n.ready and not n.unschedulable and not _leaving(n)
                      and drain_owner(n) is None),
                hard_taints=tolerated(n.taints, ()) is not None)
        pending: list[PodInfo] = []
        for pod in pods:
            node = self.nodes.get(pod.node_name)
            if node is not None and pod.occupies and not pod.deleting:
                self._put(node, pod, _needs(pod))
            elif not pod.node_name and not pod.deleting and pod.phase in ("", "Pending"):
                pending.append(pod)
        self.emptied: set[str] = set()
        self.received: set[str] = set()  # destinations of planned Pods: no longer candidates
        self.moves: dict[tuple[str, str], str] = {}
        self._pools: dict[LabelSelector, list[_Node]] = {}
        self._reserve(pending)

    def _reserve(self, pending: Sequence[PodInfo]) -> None:
        """Pods not yet scheduled (an evicted Pod's replacement, say) take room on the node
        the scheduler would give them before anything else is planned: otherwise a pass that
        runs while they wait drains a node into room that is already spoken for. Their
        destination is no candidate meanwhile; they are nobody's to evict."""
        ordered = sorted((n for n in self.nodes.values() if n.open), key=_rank)
        for pod in sorted(pending, key=largest_first):
            needs = _needs(pod)
            target = self.place(pod, needs, ordered)
            if target is None:
                continue  # it stays Pending in the cluster too
            for r, amount in needs.items():
                target.free[r] = target.free.get(r, 0) - amount
            target.rescore()
            target.hosts += _keeps_in_use(pod)
            self.received.add(target.info.name)
            _promote(ordered, target)

    @staticmethod
    def _put(node: _Node, pod: PodInfo, needs: Mapping[str, int]) -> None:
        for r, amount in needs.items():
            node.free[r] = node.free.get(r, 0) - amount
        node.rescore()
        node.pods.append(pod)
        if pod.placement.anti_affinity:
            node.repels += 1
        node.hosts += _keeps_in_use(pod)

    @staticmethod
    def _take(node: _Node, pod: PodInfo, needs: Mapping[str, int]) -> None:
        for r, amount in needs.items():
            node.free[r] = node.free.get(r, 0) + amount
        node.rescore()
        node.pods.remove(pod)
        if pod.placement.anti_affinity:
            node.repels -= 1
        node.hosts -= _keeps_in_use(pod)

    def destinations(self, exclude: str, pool: LabelSelector) -> list[_Node]:
        """Where the Pods of ``exclude`` may go: the pool's other nodes in use, ready,
        schedulable, not leaving, not draining and not emptied by this simulation. A node
        running nothing but DaemonSet Pods and placeholders is free already (the autoscaler's
        to remove): a drain into it frees nothing, and the next plan would drain it back."""
        members = self.in_pool(pool)
        return [n for n in members if n.open and n.hosts and n.info.name != exclude
                and n.info.name not in self.emptied]

    def in_pool(self, pool: LabelSelector) -> list[_Node]:
        """The nodes ``pool`` selects, matched once per pool (labels do not change in a
        plan), in name order."""
        if pool not in self._pools:
            self._pools[pool] = [n for n in self.nodes.values() if pool.matches(n.info.labels)]
        return self._pools[pool]

    def fits(self, pod: PodInfo, needs: Mapping[str, int], node: _Node) -> bool:
        for r, amount in needs.items():
            if amount > 0 and node.free.get(r, 0) < amount:
                return False
        placement = pod.placement
        if placement is not UNCONSTRAINED:
            if not placement.admits(node.info.name, node.info.labels):
                return False
            if node.hard_taints and tolerated(node.info.taints, placement.tolerations):
                return False
        elif node.hard_taints:
            return False
        return not (node.repels or placement.anti_affinity) or not self._repelled(pod, node)

    @staticmethod
    def _repelled(pod: PodInfo, node: _Node) -> bool:
        """Required anti-affinity on the hostname, both ways."""
        for other in node.pods:
            if any(t.selects(pod.namespace, other.namespace, other.labels)
                   for t in pod.placement.anti_affinity):
                return True
            if any(t.selects(other.namespace, pod.namespace, pod.labels)
                   for t in other.placement.anti_affinity):
                return True
        return False

    def place(self, pod: PodInfo, needs: Mapping[str, int], ordered: list[_Node]
              ) -> _Node | None:
        """The node the compaction scheduler would pick: feasible, most allocated.
        ``ordered`` holds the destinations, most allocated first."""
        if pod.placement is UNCONSTRAINED or pod.placement.tolerations_only:
            return next((n for n in ordered if self.fits(pod, needs, n)), None)
        best: tuple[float, str] | None = None
        chosen: _Node | None = None
        for node in ordered:
            if not self.fits(pod, needs, node):
                continue
            requested = {r: node.info.allocatable.get(r, 0) - node.free.get(r, 0) + needs.get(r, 0)
                         for r in ("cpu", "memory")}
            key = (-most_allocated(requested, node.info.allocatable), node.info.name)
            if best is None or key < best:
                best, chosen = key, node
        return chosen

    def shortfall(self, pod: PodInfo, exclude: str, pool: LabelSelector) -> str:
        """Why ``pod`` fits no destination, for a person: the first resource short everywhere
        it could go, or its constraints."""
        admitting = [n for n in self.destinations(exclude, pool)
                     if pod.placement.admits(n.info.name, n.info.labels)
                     and tolerated(n.info.taints, pod.placement.tolerations) is None]
        if not admitting:
            return "no other node in use admits it (pool, nodeSelector, affinity or taints)"
        for resource, amount in sorted(_needs(pod).items()):
            if amount > 0 and all(n.free.get(resource, 0) < amount for n in admitting):
                return "room for 1 more Pod" if resource == "pods" else \
                    f"{resource} {format_milli(resource, amount)}"
        if pod.placement.anti_affinity or any(n.repels for n in admitting):
            return "required anti-affinity on the hostname"
        return "no node has room for all it requests at once"

    def move(self, pods: Sequence[PodInfo], source: str, pool: LabelSelector) -> Reason | None:
        """Place every Pod of ``source`` elsewhere, or none: the reason it failed, or None."""
        wanted = [_needs(p) for p in pods]
        # What even the smallest of these Pods needs: a node short of it takes none of them.
        floor = [(r, a) for r in set().union(*wanted)
                 if (a := min(n.get(r, 0) for n in wanted)) > 0]
        ordered = sorted((n for n in self.destinations(source, pool) if _holds(n, floor)),
                         key=_rank)
        placed: list[tuple[_Node, PodInfo, dict[str, int]]] = []
        for pod in sorted(pods, key=largest_first):
            needs = _needs(pod)
            target = self.place(pod, needs, ordered)
            if target is None:
                # Judged before the undo: the room its siblings took is what it lacks.
                reason = Reason("does_not_fit", f"pod {pod.namespace}/{pod.name} does not "
                                f"fit elsewhere: {self.shortfall(pod, source, pool)}")
                for node, done, amount in reversed(placed):
                    self._take(node, done, amount)
                return reason
            self._put(target, pod, needs)
            placed.append((target, pod, needs))
            if not _holds(target, floor):
                ordered.remove(target)  # full for the rest of these Pods
                continue
            _promote(ordered, target)
        for node, pod, _ in placed:
            self.received.add(node.info.name)
            self.moves[pod.key] = node.info.name
        self.emptied.add(source)
        return None


def _rank(node: _Node) -> tuple[float, str]:
    return node.rank


def _holds(node: _Node, floor: Sequence[tuple[str, int]]) -> bool:
    """Whether ``node`` has room for ``floor``: (resource, amount) pairs."""
    free = node.free
    for r, amount in floor:
        if free.get(r, 0) < amount:
            return False
    return True


def _promote(ordered: list[_Node], target: _Node) -> None:
    """Keep ``ordered`` most allocated first: the target's score rose; move it up past those
    it passed."""
    i = ordered.index(target)
    key = target.rank
    while i > 0 and ordered[i - 1].rank > key:
        ordered[i - 1], ordered[i] = ordered[i], ordered[i - 1]
        i -= 1


def _blocker(pod: PodInfo, member: Member | None, policy: Policy,
             pdbs: Sequence[PdbInfo]) -> Reason | None:
    """Why this Pod keeps its node for ``policy``; None when the policy can move it."""
    who = f"pod {pod.namespace}/{pod.name}"
    ev = policy.descheduler.default_evictor
    if pod.namespace in names.PROTECTED_NAMESPACES:
        return Reason("protected_namespace", f"{who} is in {pod.namespace}")
    if pod.owner is None:
        return Reason("bare_pod", f"{who} has no controller (a bare Pod is never recreated)")
    if member is None or member.policy != policy.id:
        return Reason("out_of_scope", f"{who} is not in the policy's scope")
    if member.kind not in evictable_kinds(ev.evict_daemon_set_pods):
        return Reason("kind_not_evicted",
                      f"{who} belongs to a {member.kind.value} (its Pods are not evicted)")
    if member.suppressed:
        return Reason("suppressed", f"{who} belongs to a suppressed workload")
    if unsafe_to_evict(pod.annotations):
        value = pod.annotations[names.SAFE_TO_EVICT_ANNOTATION]
        return Reason("safe_to_evict", f"{who} safe-to-evict={value}")
    for pdb in pdbs:
        if pdb.covers(pod) and pdb.disruptions_allowed <= 0:
            return Reason("pdb", f"pdb {pdb.namespace}/{pdb.name} allows 0 disruptions")
    if pod.local_storage and not ev.evict_local_storage_pods:
        return Reason("local_storage", f"{who} uses local storage")
    if pod.pvc and ev.ignore_pvc_pods:
        return Reason("pvc", f"{who} has a PersistentVolumeClaim")
    critical = pod.priority_class_name in SYSTEM_CRITICAL or (
        pod.priority is not None and pod.priority >= 2_000_000_000)
    if critical and not ev.evict_system_critical_pods:
        return Reason("system_critical", f"{who} is system-critical")
    if pod.placement.unsimulated:
        return Reason("not_simulated", f"{who}: {pod.placement.unsimulated} is not simulated")
    return None


@dataclass(frozen=True)
class Candidate:
    node: str
    movable: tuple[PodInfo, ...]  # the policy evicts these
    riders: tuple[PodInfo, ...]  # placeholders: they must fit elsewhere too, nobody evicts them
    blockers: tuple[Reason, ...]


def _candidates(pool: Sequence[_Node], policy: Policy, members: Mapping[tuple[str, str], Member],
                pdbs: Sequence[PdbInfo]) -> list[Candidate]:
    out = []
    for node in pool:
        movable: list[PodInfo] = []
        riders: list[PodInfo] = []
        blockers: list[Reason] = []
        for pod in node.pods:
            if pod.daemon or pod.mirror:
                continue
            if is_placeholder(pod.priority):
                riders.append(pod)
                continue
            reason = _blocker(pod, members.get(pod.key), policy, pdbs)
            if reason is None:
                movable.append(pod)
            else:
                blockers.append(reason)
        out.append(Candidate(node.info.name, tuple(movable), tuple(riders), tuple(blockers)))
    return out


def _order(candidate: Candidate, node: _Node) -> tuple[int, float, str]:
    """Fewest Pods, then least requested, then name: the order peers try nodes in."""
    u = _utilization(node)
    return (len(candidate.movable) + len(candidate.riders), u.cpu + u.memory, candidate.node)


def _gates(node: _Node, policy: Policy, ours: Taint | None, gate: tuple[bool, int]
           ) -> list[Reason]:
    """Why a node is no candidate at all, whatever its Pods."""
    hnu = policy.descheduler.high_node_utilization
    reasons = []
    if not node.info.ready or node.info.unschedulable:
        reasons.append(Reason("not_ready", "node is not ready or is cordoned"))
    if _leaving(node.info):
        reasons.append(Reason("leaving", "node is being removed by an autoscaler"))
    if ours is not None:
        reasons.append(Reason("draining_for_other",
                              f"node is draining for policy {ours.value}"))
    u = _utilization(node)
    if not is_underutilized(u, hnu.thresholds):
        t = hnu.thresholds
        reasons.append(Reason("above_thresholds", (
            f"above the thresholds (cpu {u.cpu:.0f}%/{t.cpu:g}%, memory {u.memory:.0f}%/"
            f"{t.memory:g}%, pods {u.pods:.0f}%/{t.pods:g}%)")))
    elif not gate[0]:
        reasons.append(Reason("number_of_nodes", (
            f"only {gate[1]} underutilized nodes; numberOfNodes is {hnu.number_of_nodes}")))
    return reasons


def plan_policy(policy: Policy, cluster: _Cluster, pool: LabelSelector,
                members: Mapping[tuple[str, str], Member], pdbs: Sequence[PdbInfo],
                now: datetime.datetime, drain_timeout: datetime.timedelta) -> DrainPlan:
    hnu = policy.descheduler.high_node_utilization
    in_pool = cluster.in_pool(pool)
    in_use = tuple(sorted(n.info.name for n in in_pool
                          if any(not (p.daemon or p.mirror) for p in n.pods)))
    candidates = {c.node: c for c in _candidates(in_pool, policy, members, pdbs)}
    mine = sorted(n.info.name for n in cluster.nodes.values()
                  if (t := drain_owner(n.info)) is not None and t.value == policy.id)
    unremovable: dict[str, list[Reason]] = {}
    stakes: set[str] = set()  # unremovable nodes where this policy has Pods to move
    drained: list[str] = []
    abandoned: list[Unremovable] = []
    freeable: list[str] = []
    underutilized = sum(1 for n in in_pool if is_underutilized(_utilization(n), hnu.thresholds))
    gate = (underutilized > hnu.number_of_nodes, underutilized)

    # What this policy drains already comes first: kept while the plan holds.
    for name in mine:
        c = candidates.get(name)
        if c is None:
            abandoned.append(Unremovable(name, (Reason("left_pool",
                                                       "node left the policy's node pool"),)))
            continue
        if not c.movable:
            if c.blockers:  # what is left can never move: the node will not be freed
                abandoned.append(Unremovable(name, (c.blockers[0],)))
                continue
            drained.append(name)
            cluster.emptied.add(name)
            continue
        taint = drain_owner(cluster.nodes[name].info)
        started = parse_time(taint.time_added) if taint else None
        reason = (Reason("timed_out", f"the drain did not finish within {drain_timeout}")
                  if started is not None and now - started > drain_timeout
                  else c.blockers[0] if c.blockers
                  else cluster.move(c.movable + c.riders, name, pool))
        if reason is None:
            freeable.append(name)
        else:
            abandoned.append(Unremovable(name, (reason,)))
    kept = len(freeable)
    order = sorted((c for c in candidates.values() if c.node not in mine),
                   key=lambda c: _order(c, cluster.nodes[c.node]))
    for c in order:
        if not c.movable and not c.riders and not c.blockers:
            continue  # nothing but DaemonSet and mirror Pods runs here
        if c.node in cluster.received:
            unremovable[c.node] = [Reason("destination",
                                          "takes Pods of the nodes planned to drain first")]
            continue
        node = cluster.nodes[c.node]
        reasons = list(c.blockers) + _gates(node, policy, drain_owner(node.info), gate)
        if not reasons:
            failure = cluster.move(c.movable + c.riders, c.node, pool)
            if failure is None:
                freeable.append(c.node)
                continue
            reasons.append(failure)
        unremovable[c.node] = reasons
        if c.movable:
            stakes.add(c.node)
    # Only nodes with Pods to evict drain; one of placeholders only is the autoscaler's.
    drainable = [n for n in freeable if candidates[n].movable]
    draining = tuple(drainable[:max(policy.descheduler.max_draining_nodes, kept)])
    return DrainPlan(
        policy.id, in_use, tuple(freeable), draining, tuple(drained), tuple(abandoned),
        tuple(Unremovable(n, tuple(r), n in stakes) for n, r in sorted(unremovable.items())),
        {n: next_evictions(candidates[n].movable, policy.descheduler) for n in draining},
        _moves_of(cluster.moves, [candidates[n] for n in freeable]))


def _moves_of(moves: Mapping[tuple[str, str], str], freed: Iterable[Candidate]
              ) -> dict[tuple[str, str], str]:
    keys = {p.key for c in freed for p in (*c.movable, *c.riders)}
    return {key: node for key, node in moves.items() if key in keys}


DRAIN_TIMEOUT: Final = datetime.timedelta(hours=6)


# A plan is reused for at most this long while its inputs stay the same (time alone matters
# only for a drain's timeout, of hours).
REUSE: Final = datetime.timedelta(minutes=5)
# The labels Compactor itself writes on Pods; a plan never reads them, unless a budget or an
# anti-affinity term selects on one.
_OWN_POD_LABELS: Final = frozenset({
    names.POLICY_LABEL, names.WORKLOAD_KIND_LABEL, names.PROTECTED_LABEL,
    names.SUPPRESSED_LABEL, names.DRAINING_LABEL})


@dataclass(frozen=True)
class DrainMemo:
    """The last plans and a digest of what they were computed from."""

    key: int
    at: datetime.datetime
    plans: tuple[DrainPlan, ...]


def _selects_own(selector: LabelSelector | None) -> bool:
    return selector is not None and any(r.key in _OWN_POD_LABELS for r in selector.requirements)


def inputs_key(policies: Sequence[tuple[Policy, LabelSelector]], nodes: Iterable[NodeInfo],
               pods: Iterable[PodInfo], members: Mapping[tuple[str, str], Member],
               pdbs: Sequence[PdbInfo]) -> int | None:
    """A digest of everything ``plan_drains`` reads but the metadata Compactor writes on Pods
    (its labels and intent annotation change on every Pod while a policy change is carried
    out, and nothing the plan decides depends on them); None when a budget or a Pod's
    anti-affinity selects on one of those labels, so that no plan may be reused."""
    if any(_selects_own(b.selector) for b in pdbs):
        return None
    pod_keys = []
    placements: dict[int, str] = {}  # most Pods share a few records: one repr each
    for p in pods:
        placement = ""
        if p.placement is not UNCONSTRAINED:
            if id(p.placement) not in placements:
                if any(_selects_own(t.selector) for t in p.placement.anti_affinity):
                    return None
                placements[id(p.placement)] = repr(p.placement)
            placement = placements[id(p.placement)]
        pod_keys.append((
            p.namespace, p.name, p.uid, p.owner, p.node_name, p.scheduler_name, p.priority,
            p.priority_class_name, p.phase, p.ready, p.deleting, p.created, p.local_storage,
            p.pvc, tuple(p.requests.items()), placement,
            p.annotations.get(names.SAFE_TO_EVICT_ANNOTATION),
            p.annotations.get("kubernetes.io/config.mirror"),
            tuple(kv for kv in p.labels.items() if kv[0] not in _OWN_POD_LABELS),
            members.get(p.key)))
    return hash((
        tuple((repr(policy), repr(pool)) for policy, pool in policies),
        tuple((n.name, tuple(n.labels.items()), tuple(n.allocatable.items()), n.taints,
               n.unschedulable, n.ready, n.uid) for n in nodes),
        tuple(pod_keys), tuple(repr(b) for b in pdbs)))


def reuse_or_plan(memo: DrainMemo | None, policies: Sequence[tuple[Policy, LabelSelector]],
                  nodes: Sequence[NodeInfo], pods: Sequence[PodInfo],
                  members: Mapping[tuple[str, str], Member], pdbs: Sequence[PdbInfo],
                  now: datetime.datetime, drain_timeout: datetime.timedelta = DRAIN_TIMEOUT
                  ) -> tuple[list[DrainPlan], DrainMemo | None]:
    """``plan_drains``, or the last plans while nothing they read has changed (passes that
    carry a policy change onto thousands of Pods come every few seconds; a plan of 500
    nodes costs a second each time)."""
    key = inputs_key(policies, nodes, pods, members, pdbs)
    if key is not None and memo is not None and memo.key == key and now - memo.at < REUSE:
        return list(memo.plans), memo
    plans = plan_drains(policies, nodes, pods, members, pdbs, now, drain_timeout)
    return plans, None if key is None else DrainMemo(key, now, tuple(plans))


def plan_drains(policies: Sequence[tuple[Policy, LabelSelector]], nodes: Iterable[NodeInfo],
                pods: Iterable[PodInfo], members: Mapping[tuple[str, str], Member],
                pdbs: Sequence[PdbInfo], now: datetime.datetime,
                drain_timeout: datetime.timedelta = DRAIN_TIMEOUT) -> list[DrainPlan]:
    """Every policy's plan, in name order, on one simulated cluster: what one policy plans
    onto a node is there for the next."""
    cluster = _Cluster(nodes, pods)
    return [plan_policy(policy, cluster, pool, members, pdbs, now, drain_timeout)
            for policy, pool in sorted(policies, key=lambda pp: pp[0].name)]
