"""Which nodes the plan frees later would draw the Pods of the drains it starts now. Pure.

A drain starts on a few nodes at a time (``maxDrainingNodes``); the other nodes the plan would
free carry no drain taint yet, and the compaction scheduler weighs them as it weighs any node.
Where one scores as high as the node the plan sends a Pod to, the scheduler may put the Pod
there: it breaks ties between equal scores at random, and MostAllocated's scores are integers,
so ties are common among nodes of one shape. The Pod then fills a node the plan meant to free.
Such a node is held back (``Code.ATTRACTED``) and the plan made again without it; the drain that
follows, once the first has ended, judges it anew.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controller.drain_planner.reasons import Code, Reason
from controller.drain_planner.scoring import (
    intolerable_soft_taints,
    most_allocated_score,
    nonzero,
)
from controller.drain_planner.sim_node import SimNode, admits, needs_of, shape
from controller.drain_planner.simulated_cluster import Cluster
from controller.snapshot.pod import PodInfo


def _key(cluster: Cluster, node: SimNode, pod: PodInfo) -> tuple[int, int]:
    """How the profile ranks ``node`` for ``pod`` as the node is before the plan's moves."""
    cpu, memory = nonzero(pod.requests)
    scored = cluster.initial[node.info.name][1]
    return (intolerable_soft_taints(node.info.taints, pod.constraints.tolerations),
            -most_allocated_score((scored[0] + cpu, scored[1] + memory),
                                  node.info.allocatable))


def _offers(cluster: Cluster, node: SimNode, pod: PodInfo) -> bool:
    """``node`` as it is now admits ``pod`` and has room for it."""
    free = cluster.initial[node.info.name][0]
    return admits(pod, node) and all(free.get(r, 0) >= amount
                                     for r, amount in needs_of(pod).items())


def attracting(cluster: Cluster, leaving: Mapping[str, Sequence[PodInfo]],
               later: Sequence[str]) -> dict[str, Reason]:
    """The nodes of ``later`` (freed by the plan, not yet draining) that the compaction
    scheduler would rank at least as high as the destination of a Pod of ``leaving`` (the
    draining nodes' Pods), each with the reason it stays for now."""
    groups: dict[tuple[object, ...], list[SimNode]] = {}
    for name in later:
        node = cluster.nodes[name]
        groups.setdefault(shape(node), []).append(node)
    for group in groups.values():
        group.sort(key=lambda n: _key(cluster, n, PodInfo("", "", "")))
    out: dict[str, Reason] = {}
    for source, pods in sorted(leaving.items()):
        for pod in pods:
            target = cluster.nodes.get(cluster.moves.get(pod.key, ""))
            if target is None:
                continue
            bar = _key(cluster, target, pod)
            for group in groups.values():
                rival = next((n for n in group if _offers(cluster, n, pod)), None)
                if rival is not None and rival.info.name not in out and \
                        _key(cluster, rival, pod) <= bar:
                    out[rival.info.name] = Reason(Code.ATTRACTED, (
                        f"the compaction scheduler ranks it as high as {target.info.name} "
                        f"for pod {pod.namespace}/{pod.name}, which the drain of {source} "
                        "moves now: it stays until that drain has ended"))
    return out
