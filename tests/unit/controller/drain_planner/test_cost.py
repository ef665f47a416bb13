"""What freeing a node costs, as table tests of the pure rules: ``maxEvictionsToFreeNode``
keeps a node whose freeing costs more, with its own reason; the plan says each freeable
node's cost; and the cheapest nodes drain first when ``maxDrainingNodes`` holds the drains
back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from compaction.descheduler_scope import DeschedulerScope
from compaction.policy import Policy
from compaction.safety import is_placeholder
from compaction.selector import LabelSelector
from compaction.validation import parse_policy
from controller.drain_planner.drain_plan import DrainPlan
from controller.drain_planner.eligibility import Scope
from controller.drain_planner.gates import over_limit
from controller.drain_planner.planner import choose_drains
from controller.drain_planner.reasons import Code
from controller.drain_planner.taint import drain_taint
from controller.plan.policy_status import _plan_status
from controller.snapshot.node import NodeInfo
from controller.snapshot.pod import PodInfo
from tests.unit.controller.drain_planner.test_planner import NOW, managed, node, pod
from tests.unit.controller.drain_planner.test_planner_policies import (
    SHARED,
    TWO_TEAMS,
    _members,
)

ALL = LabelSelector()
BY_TEAM: dict[str, str | None] = {"team-a": "a", "team-b": "b"}


def _policy(name: str = "p", **descheduler: Any) -> Policy:
    return parse_policy({"metadata": {"name": name}, "spec": {"descheduler": {
        "highNodeUtilization": {"thresholds": {"cpu": 80, "memory": 80, "pods": 80}},
        **descheduler}}})


def _scope(limit: int | None, name: str = "p") -> Scope:
    policy = _policy(name, **({} if limit is None else {"maxEvictionsToFreeNode": limit}))
    return Scope(policy, DeschedulerScope.of(policy), ALL, frozenset(), (True, 0), True)


@pytest.mark.parametrize(("cost", "limits", "texts"), [
    pytest.param(9, [None], [], id="unset-no-limit"),
    pytest.param(3, [3], [], id="at-the-limit"),
    pytest.param(0, [0], [], id="nothing-to-evict-within-zero"),
    pytest.param(1, [0], ["freeing the node costs 1 eviction, above maxEvictionsToFreeNode 0"],
                 id="one-over-zero"),
    pytest.param(4, [3], ["freeing the node costs 4 evictions, above maxEvictionsToFreeNode 3"],
                 id="over"),
    pytest.param(4, [None, 3], [
        "policy b: freeing the node costs 4 evictions, above maxEvictionsToFreeNode 3"],
        id="one-of-two-policies-names-itself"),
    pytest.param(4, [2, 3], [
        "policy a: freeing the node costs 4 evictions, above maxEvictionsToFreeNode 2",
        "policy b: freeing the node costs 4 evictions, above maxEvictionsToFreeNode 3"],
        id="both-of-two-policies"),
])
def test_a_node_over_a_judging_policys_limit_is_no_candidate(
        cost: int, limits: Sequence[int | None], texts: list[str]) -> None:
    governing = [_scope(limit, name) for limit, name in zip(limits, "ab", strict=False)] \
        if len(limits) > 1 else [_scope(limits[0])]
    reasons = over_limit(cost, governing)
    assert [r.text for r in reasons] == texts
    assert {r.code for r in reasons} <= {Code.EVICTION_COST}


def _plan(nodes: Sequence[NodeInfo], pods: Sequence[PodInfo], **descheduler: Any
          ) -> DrainPlan:
    (plan,) = choose_drains([(_policy(**descheduler), ALL)], nodes, pods, managed(*pods), (),
                            NOW)
    return plan


def _codes(plan: DrainPlan, name: str) -> list[str]:
    return [r.code for u in (*plan.unremovable, *plan.abandoned) if u.node == name
            for r in u.reasons]


DENSE = [pod("d1", "dense", 1.5), pod("d2", "dense", 1)]
TWO_ON_SPARSE = [*DENSE, pod("s1", "sparse"), pod("s2", "sparse")]
HOLD: dict[str, Any] = {"priority": -10, "owner": ("ReplicaSet", "placeholder")}


@pytest.mark.parametrize(("pods", "limit", "freed"), [
    pytest.param(TWO_ON_SPARSE, None, True, id="no-limit-drains"),
    pytest.param(TWO_ON_SPARSE, 2, True, id="at-the-limit-drains"),
    pytest.param(TWO_ON_SPARSE, 1, False, id="over-the-limit-stays"),
    pytest.param([*DENSE, pod("s1", "sparse"), pod("h", "sparse", 0.1, **HOLD)], 1, True,
                 id="a-placeholder-costs-no-eviction"),
    pytest.param([*DENSE, pod("h", "sparse", 0.1, **HOLD)], 0, True,
                 id="placeholders-only-within-zero"),
])
def test_a_node_is_freed_only_within_max_evictions_to_free_node(
        pods: list[PodInfo], limit: int | None, freed: bool) -> None:
    settings = {} if limit is None else {"maxEvictionsToFreeNode": limit}
    plan = _plan([node("dense"), node("sparse")], pods, **settings)
    assert ("sparse" in plan.freeable) is freed, plan
    if freed:
        evicted = sum(1 for p in pods if p.node_name == "sparse" and not is_placeholder(
            p.priority))
        assert plan.costs["sparse"] == evicted
        return
    assert "sparse" not in plan.draining and not plan.evict and not plan.moves
    assert _codes(plan, "sparse") == [Code.EVICTION_COST]
    (verdict,) = [u for u in plan.unremovable if u.node == "sparse"]
    assert verdict.reasons[0].text == (
        "freeing the node costs 2 evictions, above maxEvictionsToFreeNode 1")


def test_a_shared_nodes_cost_counts_every_policys_evictions() -> None:
    """Team b allows 1 eviction per node: each shared node costs 2 (a Pod of each team), so
    none is freed, and both policies say why."""
    policies = [(_policy("a"), ALL), (_policy("b", maxEvictionsToFreeNode=1), ALL)]
    plans = choose_drains(policies, SHARED, TWO_TEAMS, _members(TWO_TEAMS, BY_TEAM), (), NOW)
    for d in plans:
        assert d.freeable == d.draining == ()
        assert {u.node for u in d.unremovable} == {n.name for n in SHARED}
        assert all(r.text == "policy b: freeing the node costs 2 evictions, above "
                   "maxEvictionsToFreeNode 1" for u in d.unremovable for r in u.reasons)


def test_a_drain_under_way_goes_on_when_the_limit_is_lowered() -> None:
    """The limit decides whether a drain starts; one started goes on (each eviction lowers
    what is left to pay)."""
    nodes = [node("dense"), replace(node("sparse"), taints=(drain_taint("p", NOW),))]
    plan = _plan(nodes, TWO_ON_SPARSE, maxEvictionsToFreeNode=1)
    assert plan.draining == ("sparse",) and plan.costs == {"sparse": 2}


def test_the_cheapest_node_drains_first_when_max_draining_nodes_holds_back() -> None:
    """``cheap`` needs 1 eviction (its placeholders move without one) and ``dear`` 2, though
    ``cheap`` runs more Pods: with one drain at a time, ``cheap`` drains, and the plan lists
    each freeable node's cost, cheapest first. (``dense``, above the thresholds, takes
    their Pods.)"""
    nodes = [node("dense", 16), node("cheap"), node("dear")]
    pods = [pod("d1", "dense", 13), pod("c1", "cheap"),
            *(pod(f"h{i}", "cheap", 0.1, **HOLD) for i in range(3)),
            pod("e1", "dear"), pod("e2", "dear")]
    plan = _plan(nodes, pods)
    assert plan.freeable == ("cheap", "dear") and plan.draining == ("cheap",)
    assert plan.costs == {"cheap": 1, "dear": 2}
    assert _plan(nodes, pods, maxDrainingNodes=2).draining == ("cheap", "dear")


def test_the_plan_in_status_lists_each_freeable_nodes_cost_in_plan_order() -> None:
    """A list, so that a merge patch of the next status replaces it: a map would keep the
    keys of nodes no longer freeable."""
    drains = DrainPlan("p", freeable=("n2", "n1"), costs={"n1": 3, "n2": 1})
    assert _plan_status(drains, {})["evictionsToFree"] == [
        {"node": "n2", "evictions": 1}, {"node": "n1", "evictions": 3}]
    assert _plan_status(DrainPlan("p"), {})["evictionsToFree"] == []
