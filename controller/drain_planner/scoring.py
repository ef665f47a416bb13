"""How the compaction scheduler's profile scores a node for a Pod, as the simulation scores it.
Pure.

The profile (``controller.components.scheduler``) scores with NodeResourcesFit's MostAllocated
on cpu and memory at weight 1 and TaintToleration at a weight above every other score
together, and scores every feasible node. So a node with fewer PreferNoSchedule taints the Pod
does not tolerate always wins, and among nodes with as many, the most allocated one does.
kube-scheduler scores in integers and counts a Pod without a cpu or memory request as 100m
and 200 MiB (``schedutil.DefaultMilliCPURequest``, ``DefaultMemoryRequest``); so does this.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from compaction import quantity
from controller.drain_planner.sim_node import SimNode, fits
from controller.snapshot.constraints import UNCONSTRAINED, Effect, Taint, Toleration
from controller.snapshot.pod import PodInfo

MAX_SCORE: Final = 100
DEFAULT_CPU: Final = 100  # milli-CPU: 100m
DEFAULT_MEMORY: Final = 200 * 2**20 * quantity.UNIT  # 200 MiB, in milli-bytes
SCORED: Final = ("cpu", "memory")


def most_allocated(requested: Mapping[str, int], allocatable: Mapping[str, int]) -> float:
    """NodeResourcesFit's MostAllocated score on cpu and memory, weight 1 each (0-100)."""
    scores = []
    for resource in ("cpu", "memory"):
        capacity = allocatable.get(resource, 0)
        if capacity > 0:
            scores.append(min(requested.get(resource, 0), capacity) * 100 / capacity)
    return sum(scores) / len(scores) if scores else 0.0


def nonzero(requests: Mapping[str, int]) -> tuple[int, int]:
    """A Pod's cpu and memory as the scheduler scores them: an unset request counts as its
    default (for the whole Pod here; kube-scheduler defaults each container)."""
    return requests.get("cpu") or DEFAULT_CPU, requests.get("memory") or DEFAULT_MEMORY


def most_allocated_score(scored: tuple[int, int], allocatable: Mapping[str, int]) -> int:
    """MostAllocated in the scheduler's own integer arithmetic, for what a node's Pods and the
    Pod to place request (their ``nonzero`` sums)."""
    total = weights = 0
    for requested, resource in zip(scored, SCORED, strict=True):
        capacity = allocatable.get(resource, 0)
        if capacity == 0:
            continue
        total += min(requested, capacity) * MAX_SCORE // capacity
        weights += 1
    return total // weights if weights else 0


def intolerable_soft_taints(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> int:
    """TaintToleration's count: the PreferNoSchedule taints no toleration of the Pod tolerates."""
    return sum(1 for taint in taints if taint.effect == Effect.PREFER_NO_SCHEDULE
               and not any(t.tolerates(taint) for t in tolerations))


def minds_every_soft_taint(tolerations: Sequence[Toleration]) -> bool:
    """No toleration matches a PreferNoSchedule taint: every soft taint counts against a node
    (the API server's default tolerations, for one, match NoExecute only)."""
    return not any(t.effect in ("", Effect.PREFER_NO_SCHEDULE) for t in tolerations)


def scheduler_key(node: SimNode, pod: PodInfo, extra_soft: int = 0,
                  leaving_pod: bool = False) -> tuple[int, int]:
    """How the profile ranks ``node`` for ``pod``, least first: its intolerable soft taints
    (``extra_soft`` more: the drain taint a node the plan empties will carry), then its
    MostAllocated score with the Pod on it, highest first. ``leaving_pod``: the Pod is on the
    node now (its own node, scored as it will be once the Pod has left and comes back)."""
    cpu, memory = nonzero(pod.requests)
    if leaving_pod:
        cpu, memory = 0, 0
    taints = intolerable_soft_taints(node.info.taints, pod.constraints.tolerations)
    return (taints + extra_soft, -most_allocated_score(
        (node.scored[0] + cpu, node.scored[1] + memory), node.info.allocatable))


def book(node: SimNode, pod: PodInfo, needs: Mapping[str, int], sign: int) -> None:
    """Take (1) or give back (-1) what ``pod`` holds on ``node``: its requests, and what the
    scheduler scores of them."""
    free = node.free
    for r, amount in needs.items():
        free[r] = free.get(r, 0) - sign * amount
    requests = pod.requests  # ``nonzero``, written out: this runs once per Pod per plan
    scored = node.scored
    node.scored = (scored[0] + sign * (requests.get("cpu") or DEFAULT_CPU),
                   scored[1] + sign * (requests.get("memory") or DEFAULT_MEMORY))


def choice(pod: PodInfo, needs: Mapping[str, int], ordered: Sequence[SimNode],
           skip: SimNode | None = None) -> SimNode | None:
    """The node the compaction scheduler would pick: feasible, most allocated.
    ``ordered`` holds the destinations, most allocated first; ``skip`` is none of them.
    A Pod without constraints takes the first that fits: scanning stops there, so a move
    reads only the head of its pool's destinations."""
    tolerations = pod.constraints.tolerations
    if pod.constraints is UNCONSTRAINED or pod.constraints.tolerations_only:
        # TaintToleration outweighs every other score: the first that fits without a soft
        # taint the Pod minds wins; else the fewest such taints, most allocated first.
        # Most Pods tolerate no soft taint at all: then every node with one ranks below
        # every node without, and is read only when none of those fits.
        minds_all = minds_every_soft_taint(tolerations)
        fewest: tuple[int, SimNode] | None = None
        passed = False
        for n in ordered:
            if n is skip:
                continue
            if n.soft_taints:
                if minds_all:
                    passed = True
                    continue
                minded = intolerable_soft_taints(n.info.taints, tolerations)
                if minded:
                    if (fewest is None or minded < fewest[0]) and fits(pod, needs, n):
                        fewest = (minded, n)
                    continue
            if fits(pod, needs, n):
                return n
        if passed:
            for n in ordered:
                if n is not skip and n.soft_taints and fits(pod, needs, n):
                    minded = intolerable_soft_taints(n.info.taints, ())
                    if fewest is None or minded < fewest[0]:
                        fewest = (minded, n)
        return None if fewest is None else fewest[1]
    best: tuple[int, float, str] | None = None
    chosen: SimNode | None = None
    for node in ordered:
        if node is skip or not fits(pod, needs, node):
            continue
        requested = {r: node.info.allocatable.get(r, 0) - node.free.get(r, 0) + needs.get(r, 0)
                     for r in ("cpu", "memory")}
        key = (intolerable_soft_taints(node.info.taints, tolerations)
               if node.soft_taints else 0,
               -most_allocated(requested, node.info.allocatable), node.info.name)
        if best is None or key < best:
            best, chosen = key, node
    return chosen
