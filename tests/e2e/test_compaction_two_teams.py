"""Two teams' ClusterCompactionPolicies on four nodes that each run Pods of both teams, with
nothing else in the way: the one plan across both frees the nodes that one policy over both
namespaces would."""

from __future__ import annotations

import pytest

from localcluster import Cluster, Kube
from localcluster.cluster.stack import CompactorStack
from localcluster.demo.compaction_run import Outcome, run
from localcluster.demo.scenario import two_teams
from tests.e2e.test_compaction import assert_planned_evictions, assert_within_limits


@pytest.fixture(scope="module")
def outcome(e2e_cluster: Cluster, e2e_kube: Kube, stack: CompactorStack) -> Outcome:
    return run(e2e_cluster, e2e_kube, stack, two_teams(), interval=0.5, max_seconds=240,
               log=True)


def test_two_teams_on_shared_nodes_compact_to_the_packing(outcome: Outcome) -> None:
    r = outcome.report
    assert r.nodes_before == 4, r.table()
    # Only Compactor's own scheduler Pod stays where it landed: at most one node besides
    # the packing of the teams' Pods (one node of 4 CPU holds them all).
    assert r.nodes_after <= r.ffd_around_blockers <= 2, r.table()
    assert r.runtime_evictions == 0 and r.descheduler_evictions > 0, r.table()
    assert_planned_evictions(outcome)
    assert_within_limits(outcome, two_teams().policies[0].spec["descheduler"])
