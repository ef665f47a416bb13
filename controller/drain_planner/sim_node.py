"""A node as the drain planner's simulation fills it, and what the simulation asks of one Pod: what
it takes of a node, the order it is placed in. Pure."""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from compaction import quantity
from compaction.safety import is_placeholder
from compaction.utilization import Utilization
from controller.snapshot.constraints import UNCONSTRAINED, tolerated
from controller.snapshot.node import NodeInfo
from controller.snapshot.pod import PodInfo

# Taints of nodes another autoscaler is removing: never a destination, never a candidate.
LEAVING_TAINTS: Final = frozenset({
    "ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler",
    "karpenter.sh/disrupted", "karpenter.sh/disruption"})


@dataclass(eq=False)
class SimNode:
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
    soft_taints: bool = False  # PreferNoSchedule taints, which lower its score
    # (-score, name): sorting by it puts the most allocated first. Kept current by
    # ``rescore`` whenever ``free`` changes, so that the orderings a plan sorts hundreds of
    # times compare stored tuples instead of recomputing every score.
    rank: tuple[float, str] = (0.0, "")
    # What its Pods request as the scheduler scores them (cpu, memory; ``scoring.nonzero``).
    scored: tuple[int, int] = (0, 0)

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


def utilization(node: SimNode) -> Utilization:
    def percent(resource: str) -> float:
        capacity = node.info.allocatable.get(resource, 0)
        used = capacity - node.free.get(resource, 0)
        return 100.0 * used / capacity if capacity else 100.0
    return Utilization(percent("cpu"), percent("memory"), percent("pods"))


def leaving(node: NodeInfo) -> bool:
    return any(t.key in LEAVING_TAINTS for t in node.taints)


def needs_of(pod: PodInfo) -> dict[str, int]:
    """What ``pod`` takes of a node: its requests and one Pod."""
    needs = dict(pod.requests)
    needs["pods"] = needs.get("pods", 0) + quantity.UNIT
    return needs


def keeps_in_use(pod: PodInfo) -> bool:
    return not (pod.daemon or pod.mirror or is_placeholder(pod.priority))


def largest_first(pod: PodInfo) -> tuple[int, int, str]:
    """The order the simulation places a node's Pods in, as first-fit decreasing packs."""
    return (-pod.requests.get("cpu", 0), -pod.requests.get("memory", 0), pod.name)


def fits(pod: PodInfo, needs: Mapping[str, int], node: SimNode) -> bool:
    """Whether kube-scheduler's filters let ``pod`` onto ``node`` as the simulation holds it:
    room, nodeSelector and required node affinity, hard taints, hostname anti-affinity."""
    for r, amount in needs.items():
        if amount > 0 and node.free.get(r, 0) < amount:
            return False
    constraints = pod.constraints
    if constraints is not UNCONSTRAINED:
        # Most Pods have tolerations only (the API server's defaults): nothing to admit.
        if (constraints.node_selector or constraints.terms) and \
                not constraints.admits(node.info.name, node.info.labels):
            return False
        if node.hard_taints and tolerated(node.info.taints, constraints.tolerations):
            return False
    elif node.hard_taints:
        return False
    return not (node.repels or constraints.anti_affinity) or not _repelled(pod, node)


def admits(pod: PodInfo, node: SimNode) -> bool:
    """``pod``'s selectors, required node affinity and tolerations let it onto ``node``,
    whatever room the node has."""
    return (pod.constraints.admits(node.info.name, node.info.labels)
            and tolerated(node.info.taints, pod.constraints.tolerations) is None)


def shape(node: SimNode) -> tuple[object, ...]:
    """What makes nodes alike to the scheduler but for what they hold: allocatable, taints."""
    return (tuple(sorted(node.info.allocatable.items())), node.info.taints)


def _repelled(pod: PodInfo, node: SimNode) -> bool:
    """Required anti-affinity on the hostname, both ways."""
    for other in node.pods:
        if any(t.selects(pod.namespace, other.namespace, other.labels)
               for t in pod.constraints.anti_affinity):
            return True
        if any(t.selects(other.namespace, pod.namespace, pod.labels)
               for t in other.constraints.anti_affinity):
            return True
    return False


# A node's ``rank``, as a sort and bisect key (a C getter: the destination lists are
# bisected on every Pod a move places).
rank: Final[Callable[[SimNode], tuple[float, str]]] = operator.attrgetter("rank")


def holds(node: SimNode, floor: Sequence[tuple[str, int]]) -> bool:
    """Whether ``node`` has room for ``floor``: (resource, amount) pairs."""
    free = node.free
    for r, amount in floor:
        if free.get(r, 0) < amount:
            return False
    return True


def index_in(ordered: list[SimNode], node: SimNode) -> int:
    """Where ``node`` is in ``ordered``, sorted by ``rank`` (node's included)."""
    i = bisect_left(ordered, node.rank, key=rank)
    assert ordered[i] is node, "a destination list out of order"
    return i


def promote(ordered: list[SimNode], target: SimNode) -> None:
    """Keep ``ordered`` most allocated first: the target's score rose; move it up past those
    it passed."""
    i = ordered.index(target)
    key = target.rank
    while i > 0 and ordered[i - 1].rank > key:
        ordered[i - 1], ordered[i] = ordered[i], ordered[i - 1]
        i -= 1
