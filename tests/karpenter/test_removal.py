"""The small compaction scenario on nodes a Karpenter NodePool made (WhenEmpty from the moment
the policy is applied): Karpenter removes the nodes Compactor empties, and launches none for
the Pods Compactor's drains and re-admissions evicted (the plan placed each of them, so a
launch would mean the plan and the scheduler disagree)."""

from __future__ import annotations

import pytest

from localcluster import Cluster, Kube
from localcluster.cluster.karpenter import Karpenter, empty_nodes, pool_nodes
from localcluster.cluster.stack import CompactorStack
from localcluster.demo.compaction_run import Outcome, run
from localcluster.demo.nodepool import NodePool
from localcluster.demo.scenario import small


@pytest.fixture(scope="module")
def outcome(k_cluster: Cluster, k_kube: Kube, k_stack: CompactorStack,
            karpenter: Karpenter) -> Outcome:
    return run(k_cluster, k_kube, k_stack, small(by_eviction=True), interval=1.0, max_seconds=300,
               log=True, pool=NodePool(karpenter))


def test_karpenter_removes_the_nodes_compactor_empties(outcome: Outcome, k_kube: Kube,
                                                        karpenter: Karpenter) -> None:
    r, census = outcome.report, outcome.nodes
    assert census is not None
    assert census.before == small().nodes, r.table()
    assert r.nodes_removed is not None and r.nodes_removed >= 1, r.table()
    # Every node left runs something but DaemonSet Pods: nothing empty is kept.
    assert not empty_nodes(k_kube, karpenter.pool), r.table()
    assert len(pool_nodes(k_kube, karpenter.pool)) == census.after == r.in_use_after, r.table()
    assert r.seconds_to_last_removal is not None


def test_karpenter_launches_no_node_for_an_evicted_pod(outcome: Outcome) -> None:
    r = outcome.report
    assert r.nodes_launched == 0, r.table()
    assert r.descheduler_evictions + r.runtime_evictions > 0, r.table()


def test_nothing_protected_moved(outcome: Outcome) -> None:
    r = outcome.report
    assert r.protected_moved == 0 and r.pdb_violations == 0, r.table()
