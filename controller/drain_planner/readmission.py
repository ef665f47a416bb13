"""Where the runtime hook's replacements land, judged as the planner judges a drain's. Pure.

The runtime hook (``setLabelsByEviction``) replaces a Pod admitted before its policy so that
the compaction scheduler places it anew. A replacement placed back on the node its Pod stood on
changes nothing but the Pod's scheduler, for one eviction, so the hook leaves such a Pod alone.
The controller asks before each replacement; the preview plays every replacement out in the
hook's order (``controller.plan.hook_replay``).
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Sequence

from controller.drain_planner.scoring import scheduler_key
from controller.drain_planner.sim_node import SimNode, index_in, needs_of, rank
from controller.drain_planner.simulated_cluster import Cluster
from controller.snapshot.node import NodeInfo
from controller.snapshot.pod import PodInfo


class Readmission:
    """The cluster as the compaction scheduler sees it for one replacement after another."""

    def __init__(self, nodes: Sequence[NodeInfo], pods: Sequence[PodInfo]) -> None:
        self._nodes, self._pods = nodes, pods
        self._cluster: Cluster | None = None
        self.ordered: list[SimNode] = []

    @property
    def cluster(self) -> Cluster:
        """Built on the first question: most passes ask none."""
        if self._cluster is None:
            self._cluster = Cluster(self._nodes, self._pods)
            # Every node that takes Pods, empty ones too: the scheduler's feasible set.
            self.ordered = sorted((n for n in self._cluster.nodes.values() if n.open),
                                  key=rank)
        return self._cluster

    def target(self, pod: PodInfo) -> SimNode | None:
        """Where the compaction scheduler puts ``pod``'s replacement once the Pod has left: its
        own node (scored without it; a tie is a coin toss and counts as its own) or the best
        other node. None if no node admits it."""
        cluster = self.cluster
        own = cluster.nodes.get(pod.node_name)
        other = cluster.place(pod, needs_of(pod), self.ordered, own)
        if own is None or not own.open or not pod.constraints.admits(own.info.name,
                                                                     own.info.labels):
            return other
        if other is None or scheduler_key(own, pod, leaving_pod=True) <= scheduler_key(
                other, pod):
            return own
        return other

    def comes_back(self, pod: PodInfo) -> bool:
        """The replacement would land on the node ``pod`` stands on."""
        target = self.target(pod)
        return target is not None and target.info.name == pod.node_name

    def relocate(self, pod: PodInfo, target: SimNode) -> None:
        """Move ``pod`` from its node to ``target`` for good, as its replacement would."""
        own = self.cluster.nodes[pod.node_name]
        changed = [n for n in {id(own): own, id(target): target}.values() if n.open]
        for node in changed:
            del self.ordered[index_in(self.ordered, node)]
        needs = needs_of(pod)
        Cluster.take(own, pod, needs)
        Cluster.add(target, pod, needs)
        target.rescore()
        for node in changed:
            insort(self.ordered, node, key=rank)
