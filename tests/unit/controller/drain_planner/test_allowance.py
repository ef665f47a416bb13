"""The planner under the workloads' eviction budgets and the rule against ping-pong, as table
tests of the pure plan: a Pod Compactor may not evict now keeps its node with its own reason,
and the plan frees no more of a workload's Pods than its budget has left, the drains under way
counted first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from controller.drain_planner.allowance import Allowance
from controller.drain_planner.drain_plan import DrainPlan
from controller.drain_planner.planner import choose_drains
from controller.drain_planner.reasons import Code, Reason
from controller.drain_planner.taint import drain_taint
from controller.snapshot.node import NodeInfo
from controller.snapshot.pod import PodInfo
from tests.unit.controller.drain_planner.test_planner import ALL, NOW, _policy, managed, node, pod

WEB = "Deployment shop/web"
# One dense node with room for three small Pods, and three sparse nodes with one Pod each.
NODES = [node("dense"), node("s1"), node("s2"), node("s3")]
PODS = [pod("d1", "dense", 1.5), pod("a", "s1"), pod("b", "s2"), pod("c", "s3")]
SPREAD = ("a", "b", "c")
WHOLE = ("d1", *SPREAD)  # every Pod is the workload's


def _plan(allowance: Allowance, nodes: Sequence[NodeInfo] = NODES,
          pods: Sequence[PodInfo] = PODS, draining: int = 3) -> DrainPlan:
    (plan,) = choose_drains([(_policy(maxDrainingNodes=draining), ALL)], nodes, pods,
                            managed(*pods), (), NOW, allowance=allowance)
    return plan


def _budget(left: int, pods: Sequence[str] = WHOLE) -> Allowance:
    return Allowance(budget_of={("shop", p): WEB for p in pods}, left={WEB: left})


def _first_codes(plan: DrainPlan) -> dict[str, Code]:
    return {u.node: u.reasons[0].code for u in (*plan.unremovable, *plan.abandoned)}


RECENT = Reason(Code.RECENTLY_REPLACED, "pod shop/b replaced one Compactor evicted")
SPENT = Reason(Code.EVICTION_BUDGET, f"{WEB} spent its eviction budget 1/1h")


@pytest.mark.parametrize(("allowance", "freed", "kept"), [
    pytest.param(Allowance(), {"s1", "s2", "s3"}, {}, id="no-budget-no-hold"),
    pytest.param(Allowance(held={("shop", "b"): RECENT}), {"s1", "s3"},
                 {"s2": Code.RECENTLY_REPLACED}, id="a-recent-replacement-keeps-its-node"),
    pytest.param(Allowance(held={("shop", p): SPENT for p in WHOLE}), set(),
                 {n: Code.EVICTION_BUDGET for n in ("s1", "s2", "s3")},
                 id="a-spent-budget-keeps-every-node"),
    pytest.param(_budget(3), {"s1", "s2", "s3"}, {}, id="budget-with-room-for-all"),
    pytest.param(_budget(2), {"s1", "s2"}, {"s3": Code.EVICTION_BUDGET},
                 id="budget-with-room-for-two-frees-the-first-two"),
    pytest.param(_budget(0), set(), {n: Code.EVICTION_BUDGET for n in ("s1", "s2", "s3")},
                 id="budget-with-no-room"),
    pytest.param(_budget(1, ("a",)), {"s1", "s2", "s3"}, {},
                 id="pods-already-counted-spend-nothing"),
])
def test_what_the_plan_frees_under_the_allowance(
        allowance: Allowance, freed: set[str], kept: dict[str, Code]) -> None:
    plan = _plan(allowance)
    assert set(plan.freeable) == freed
    assert {n: c for n, c in _first_codes(plan).items() if n != "dense"} == kept
    # Nothing over the budget is ever marked for the descheduler.
    marked = {k for keys in plan.evict.values() for k in keys}
    for budget, left in allowance.left.items():
        assert sum(1 for k in marked if allowance.budget_of.get(k) == budget) <= left
    assert not marked & set(allowance.held)


def test_the_budget_text_names_the_workload_and_what_is_left() -> None:
    plan = _plan(_budget(1))
    texts = {u.node: u.reasons[0].text for u in plan.unremovable if u.node != "dense"}
    assert texts == {n: f"freeing the node takes 1 evictions of {WEB}, whose eviction budget "
                     "allows 0 more now" for n in ("s2", "s3")}


def test_a_drain_under_way_is_counted_first() -> None:
    """``s3`` drains already: its Pod takes the budget's one eviction, ``s1`` and ``s2`` wait."""
    nodes = [*NODES[:3], replace(NODES[3], taints=(drain_taint("p", NOW),))]
    plan = _plan(_budget(1), nodes)
    assert plan.freeable == ("s3",) and plan.draining == ("s3",)
    assert {n: c for n, c in _first_codes(plan).items() if n != "dense"} == {
        "s1": Code.EVICTION_BUDGET, "s2": Code.EVICTION_BUDGET}


def test_a_drain_under_way_whose_budget_is_gone_stops_with_the_reason() -> None:
    nodes = [*NODES[:3], replace(NODES[3], taints=(drain_taint("p", NOW),))]
    plan = _plan(_budget(0), nodes)
    assert "s3" not in plan.draining
    assert _first_codes(plan)["s3"] is Code.EVICTION_BUDGET


def test_the_allowance_is_in_the_plans_digest() -> None:
    from controller.drain_planner.memo import inputs_key

    policies = [(_policy(), ALL)]
    keys = {inputs_key(policies, NODES, PODS, managed(*PODS), (), frozenset(), a)
            for a in (Allowance(), _budget(1), _budget(2),
                      Allowance(held={("shop", "b"): RECENT}))}
    assert len(keys) == 4


def test_a_drain_under_way_goes_on_past_a_recent_replacement_without_marking_it() -> None:
    """On a node being drained, a Pod that replaced an eviction a moment ago waits: the drain
    goes on and marks the others; it is marked once it may go."""
    two = [*PODS[:3], pod("c", "s3"), pod("c2", "s3", 0.25)]
    nodes = [*NODES[:3], replace(NODES[3], taints=(drain_taint("p", NOW),))]
    (plan,) = choose_drains([(_policy(maxNoOfPodsToEvictPerNode=2), ALL)], nodes, two,
                            managed(*two), (), NOW,
                            allowance=Allowance(waiting=frozenset({("shop", "c")})))
    assert "s3" in plan.draining and plan.evict["s3"] == (("shop", "c2"),)
    (alone,) = choose_drains([(_policy(), ALL)], nodes, PODS, managed(*PODS), (), NOW,
                             allowance=Allowance(waiting=frozenset({("shop", "c")})))
    assert "s3" in alone.draining and alone.evict["s3"] == ()
