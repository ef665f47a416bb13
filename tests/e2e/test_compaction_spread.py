"""Compaction from a spread start that nothing re-admits: setLabelsByEviction false, where
HighNodeUtilization alone finds every node underutilized and does nothing. The plan alone
compacts it (``scenario.spread_overrides``: thresholds at 100 %)."""

from __future__ import annotations

import pytest

from localcluster import Cluster, Kube
from localcluster.cluster.stack import CompactorStack
from localcluster.demo.compaction_run import Outcome, run
from localcluster.demo.scenario import small, spread_overrides
from tests.e2e.test_compaction import assert_planned_evictions, assert_within_limits


@pytest.fixture(scope="module")
def outcome(e2e_cluster: Cluster, e2e_kube: Kube, stack: CompactorStack) -> Outcome:
    scenario = small()
    return run(e2e_cluster, e2e_kube, stack, scenario, interval=0.5, max_seconds=300, log=True,
               **spread_overrides(scenario))


def test_the_plan_alone_compacts_a_spread_cluster_close_to_the_packing(outcome: Outcome) -> None:
    r = outcome.report
    assert r.runtime_evictions == 0
    # Pods that cannot move stay where the default scheduler spread them; the packing that
    # leaves them in place is the fair figure, and one node of slack the greedy plan's (it
    # drains the node with the fewest Pods first, not in first-fit-decreasing order). Nodes
    # are counted as the plan and that packing count them: a node only a placeholder holds is
    # free (the packing moves placeholders; an autoscaler removes such a node), so one the
    # default scheduler happened to put a placeholder on is not counted against the plan.
    assert r.kept_after is not None and r.kept_after <= r.ffd_around_blockers + 1, r.table()
    assert r.descheduler_evictions > 0, r.table()  # the plan, not the hook, moved them
    assert_planned_evictions(outcome)


def test_no_descheduler_run_exceeds_the_policy_limits(outcome: Outcome) -> None:
    assert_within_limits(outcome, spread_overrides(small())["descheduler"])


def test_no_budget_is_violated_and_nothing_protected_moves(outcome: Outcome) -> None:
    assert outcome.report.pdb_violations == 0 and outcome.report.protected_moved == 0
