"""The scenario's nodes from a Karpenter NodePool, so that the nodes Compactor empties are
really removed: provisioned by a load spike with consolidation off, then ``WhenEmpty`` from the
moment the policy is applied, and counted until Karpenter has taken every empty node away."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from localcluster.cluster.karpenter import (
    Consolidation,
    Karpenter,
    NodeCensus,
    NodeWatch,
    empty_nodes,
    provision,
)
from localcluster.cluster.kube import Kube
from localcluster.demo.scenario import Scenario


@dataclass
class NodePool:
    """One run's NodePool: ``provision`` is the scenario's ``create`` hook, ``arm`` turns
    consolidation on just before the policy, ``settle`` waits for the removals and counts."""

    karpenter: Karpenter
    consolidation: Consolidation = Consolidation("WhenEmpty", "5s")
    nodes: list[str] = field(default_factory=list)
    watch: NodeWatch | None = None

    def provision(self, kube: Kube, scenario: Scenario) -> list[str]:
        self.nodes = provision(kube, self.karpenter.pool, scenario.nodes, scenario.shape)
        return self.nodes

    def arm(self, kube: Kube) -> None:
        self.watch = NodeWatch(self.karpenter.cluster, self.karpenter.pool)
        self.watch.start(kube)
        self.karpenter.set_pool(kube, self.consolidation)

    def settle(self, kube: Kube, timeout: float = 180.0, quiet: float = 15.0) -> NodeCensus:
        """Once no node of the pool runs only DaemonSet Pods (Karpenter took each away) and
        the nodes have stayed the same for ``quiet`` seconds, or after ``timeout``."""
        assert self.watch is not None, "arm first"
        deadline = time.monotonic() + timeout
        seen: tuple[int, float] = (-1, time.monotonic())
        while time.monotonic() < deadline:
            census = self.watch.census(kube)
            if census.after != seen[0]:
                seen = (census.after, time.monotonic())
            if not empty_nodes(kube, self.karpenter.pool) and \
                    time.monotonic() - seen[1] >= quiet:
                break
            time.sleep(1.0)
        self.watch.stop()
        return self.watch.census(kube)
