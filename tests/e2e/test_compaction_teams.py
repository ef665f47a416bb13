"""Several teams' policies on shared nodes, end to end: a cluster admin's
ClusterCompactionPolicy and two namespace owners' CompactionPolicies, one plan across them,
each policy's own real descheduler evicting its own Pods."""

from __future__ import annotations

import pytest

from localcluster import Cluster, Kube
from localcluster.cluster.stack import CompactorStack
from localcluster.demo.compaction_run import Outcome, run
from localcluster.demo.scenario import three_teams
from tests.e2e.test_compaction import assert_planned_evictions, assert_within_limits


@pytest.fixture(scope="module")
def outcome(e2e_cluster: Cluster, e2e_kube: Kube, stack: CompactorStack) -> Outcome:
    # The runtime hook replaces one Pod per workload at a time, and leaves the drains
    # waiting while it works on the nodes the plan frees.
    return run(e2e_cluster, e2e_kube, stack, three_teams(), interval=0.5, max_seconds=480,
               log=True)


def test_three_teams_end_where_the_plan_forecast_and_every_eviction_frees_a_node(
        outcome: Outcome) -> None:
    """The runtime hook replaces only the Pods of the nodes the plan frees, so the run ends
    at the plan's forecast: every eviction was spent on a node that ended freed, and none
    came back to the node it left. The packing around the unmovable Pods may be lower, but
    reaching it would take nodes above the policies' thresholds as sources."""
    r = outcome.report
    assert r.lower_bound <= r.nodes_after < r.nodes_before, r.table()
    assert r.ffd_around_blockers <= r.nodes_after, r.table()
    assert r.kept_after == r.predicted_after, r.table()
    assert r.evictions_from_kept == 0 and r.came_back == 0, r.table()
    assert r.evictions, r.table()
    assert_planned_evictions(outcome)


def test_each_team_keeps_its_policy_and_nothing_protected_moves(outcome: Outcome) -> None:
    labels = {(p.namespace, p.policy_label) for p in outcome.after if p.managed}
    assert labels == {("production", "compact-production"), ("batch", "batch.batch-team"),
                      ("analytics", "analytics.analytics-team")}, labels
    assert outcome.report.pdb_violations == 0 and outcome.report.protected_moved == 0


def test_no_descheduler_run_exceeds_its_policys_limits(outcome: Outcome) -> None:
    for team in three_teams().policies:
        assert_within_limits(outcome, team.spec["descheduler"])
