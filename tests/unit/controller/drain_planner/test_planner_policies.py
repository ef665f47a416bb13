"""One drain plan across every policy, as table tests of the pure planner: several teams'
Pods on shared nodes, each movable under its own policy, and a node freed only when every
policy with Pods on it allows it as a source."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from compaction.policy import Policy
from compaction.selector import LabelSelector, Operator, requirement
from compaction.validation import parse_policy
from compaction.workload import WorkloadType
from controller.drain_planner.drain_plan import DrainPlan, Member
from controller.drain_planner.planner import choose_drains
from controller.drain_planner.taint import drain_taint
from controller.plan.forecast import eventually
from controller.snapshot.constraints import Taint
from controller.snapshot.node import NodeInfo
from controller.snapshot.pod import PodInfo
from tests.unit.controller.drain_planner.test_planner import NOW, node, pod

ALL = LabelSelector()
POOL_A = LabelSelector((requirement("pool", Operator.IN, "a"),))


def _policy(name: str, **descheduler: Any) -> Policy:
    return parse_policy({"metadata": {"name": name}, "spec": {"descheduler": {
        "highNodeUtilization": {"thresholds": {"cpu": 80, "memory": 80, "pods": 80}},
        **descheduler}}})


def _team(name: str, on: str, team: str, cpu: float = 0.5, **extra: Any) -> PodInfo:
    return pod(name, on, cpu, ns=team, owner=("ReplicaSet", f"{team}-web-1"), **extra)


def _members(pods: Sequence[PodInfo], policy_of: dict[str, str | None]
             ) -> dict[tuple[str, str], Member]:
    return {p.key: Member(WorkloadType.DEPLOYMENT, policy_of.get(p.namespace), False)
            for p in pods}


# Four nodes, each running one Pod of team-a and one of team-b: everything fits on one node.
SHARED = [node(f"n{i}", labels={"pool": "a"}) for i in range(4)]
TWO_TEAMS = [p for i in range(4) for p in (_team(f"a{i}", f"n{i}", "team-a"),
                                          _team(f"b{i}", f"n{i}", "team-b"))]
BY_TEAM: dict[str, str | None] = {"team-a": "a", "team-b": "b"}


def _plans(policies: Sequence[tuple[Policy, LabelSelector]], nodes: Sequence[NodeInfo],
           pods: Sequence[PodInfo], policy_of: dict[str, str | None] | None = None,
           paused: frozenset[str] = frozenset()) -> dict[str, DrainPlan]:
    members = _members(pods, BY_TEAM if policy_of is None else policy_of)
    return {d.policy: d for d in choose_drains(policies, nodes, pods, members, (), NOW,
                                               paused=paused)}


def _eventual(policies: Sequence[tuple[Policy, LabelSelector]], nodes: Sequence[NodeInfo],
              pods: Sequence[PodInfo]) -> dict[str, DrainPlan]:
    """What the passes would free one after the other (the preview's forecast)."""
    members = _members(pods, BY_TEAM)
    return {d.policy: d for d in eventually(
        lambda ps: choose_drains(policies, nodes, ps, members, (), NOW), pods)}


def _reasons(plan: DrainPlan, node_name: str) -> list[str]:
    return [r.text for u in plan.unremovable if u.node == node_name for r in u.reasons]


def test_two_teams_policies_on_shared_nodes_free_them_together() -> None:
    plans = _plans([(_policy("a"), ALL), (_policy("b"), ALL)], SHARED, TWO_TEAMS)
    a, b = plans["a"], plans["b"]
    # Three of the four nodes can be freed, one pass after the other: each team's Pods move
    # under their own policy.
    forecast = _eventual([(_policy("a"), ALL), (_policy("b"), ALL)], SHARED, TWO_TEAMS)
    assert len(forecast["a"].freeable) == 3 and forecast["a"].freeable == forecast["b"].freeable
    assert a.draining == b.draining == (a.freeable[0],)
    first = a.freeable[0]
    # One policy's Pods leave at a time, in the order the plan placed them (the largest
    # first, then by name): team-a's now, none of team-b's, whichever CronJob fires first.
    assert {ns for ns, _ in a.evict[first]} == {"team-a"} and b.evict[first] == ()
    # Once they have gone, the drain goes on with team-b's.
    after = [p for p in TWO_TEAMS if p.key not in a.evict[first]]
    tainted = [replace(n, taints=(drain_taint("a", NOW),)) if n.name == first else n
               for n in SHARED]
    then = _plans([(_policy("a"), ALL), (_policy("b"), ALL)], tainted, after)
    assert then["a"].evict.get(first, ()) == ()
    assert {ns for ns, _ in then["b"].evict[first]} == {"team-b"}
    assert not any(r.code in ("no_policy", "out_of_scope")
                   for d in plans.values() for u in d.unremovable for r in u.reasons)


def test_the_larger_pod_leaves_first_whichever_team_it_belongs_to() -> None:
    """x holds a 250m Pod of team-a and a 1-CPU Pod of team-b; z has exactly 1 CPU free and w
    500m. Only team-b's Pod to z, then team-a's to w, frees x: evicted the other way round,
    team-a's would take z (the fuller) and team-b's would fit nowhere."""
    nodes = [node("x"), node("z"), node("w"), node("y")]
    pods = [_team("a1", "x", "team-a", 0.25), _team("b1", "x", "team-b", 1),
            _team("z1", "z", "team-c", 3), _team("w1", "w", "team-c", 3.5)]
    plans = _plans([(_policy("a"), ALL), (_policy("b"), ALL)], nodes, pods,
                   {"team-a": "a", "team-b": "b", "team-c": None})
    assert plans["a"].draining == plans["b"].draining == ("x",)
    assert plans["b"].evict["x"] == (("team-b", "b1"),) and plans["a"].evict["x"] == ()
    assert plans["b"].moves == {("team-b", "b1"): "z"}
    assert plans["a"].moves == {("team-a", "a1"): "w"}


def test_a_drain_starts_only_while_every_policy_with_pods_there_may_start_one() -> None:
    disabled = _policy("b", enabled=False)
    plans = _plans([(_policy("a"), ALL), (disabled, ALL)], SHARED, TWO_TEAMS)
    assert len(plans["a"].freeable) == 3  # still shown, as a dry run shows it
    assert plans["a"].draining == plans["b"].draining == ()
    paused = _plans([(_policy("a"), ALL), (_policy("b"), ALL)], SHARED, TWO_TEAMS,
                    paused=frozenset({"b"}))
    assert paused["a"].draining == () and len(paused["a"].freeable) == 3
    # Each policy's budget counts the nodes it takes part in draining.
    wide = _plans([(_policy("a", maxDrainingNodes=3), ALL), (_policy("b"), ALL)],
                  SHARED, TWO_TEAMS)
    assert len(wide["a"].draining) == 1
    both = _plans([(_policy("a", maxDrainingNodes=3), ALL),
                   (_policy("b", maxDrainingNodes=3), ALL)], SHARED, TWO_TEAMS)
    assert len(both["a"].draining) == 3 and both["a"].draining == both["b"].draining


@pytest.mark.parametrize(("b", "pool_b", "code", "text"), [
    pytest.param(_policy("b"), POOL_A.and_(LabelSelector((requirement(
        "zone", Operator.IN, "x"),))), "outside_pool",
        "policy b: node is outside the policy's node pool", id="outside-bs-pool"),
    pytest.param(_policy("b", highNodeUtilization={"thresholds": {
        "cpu": 5, "memory": 80, "pods": 80}}), ALL, "above_thresholds",
        "policy b: above the 5% CPU threshold",
        id="above-bs-thresholds"),
    pytest.param(_policy("b", highNodeUtilization={"numberOfNodes": 4, "thresholds": {
        "cpu": 80, "memory": 80, "pods": 80}}), ALL, "number_of_nodes",
        "policy b: only 4 underutilized nodes; numberOfNodes is 4", id="bs-number-of-nodes"),
])
def test_every_policy_with_pods_on_a_node_must_allow_it_as_a_source(
        b: Policy, pool_b: LabelSelector, code: str, text: str) -> None:
    plans = _plans([(_policy("a"), ALL), (b, pool_b)], SHARED, TWO_TEAMS)
    assert plans["a"].freeable == plans["a"].draining == ()
    for d in plans.values():  # both policies show the node, with the real reason
        for n in SHARED:
            assert text in _reasons(d, n.name), (d.policy, n.name, d.unremovable)
            assert code in {r.code for u in d.unremovable if u.node == n.name
                            for r in u.reasons}


def test_pods_of_no_policy_block_and_say_so() -> None:
    pods = [*TWO_TEAMS, _team("x", "n3", "team-x")]
    plans = _plans([(_policy("a"), ALL), (_policy("b"), ALL)], SHARED, pods,
                   {**BY_TEAM, "team-x": None})
    assert "n3" not in plans["a"].freeable and len(plans["a"].freeable) == 2
    reason = "pod team-x/x belongs to no compaction policy (Compactor never evicts it)"
    assert reason in _reasons(plans["a"], "n3") and reason in _reasons(plans["b"], "n3")


def test_a_policy_shows_only_the_nodes_its_pods_are_on() -> None:
    # n0 runs team-a only, n1 team-b only, the rest nothing: neither policy reports the
    # other's node as its own, nor another policy's Pods as its blocker.
    nodes = [node("n0"), node("n1"), node("n2", cpu=1)]
    pods = [_team("a0", "n0", "team-a", 3.5), _team("b0", "n1", "team-b", 3.5)]
    plans = _plans([(_policy("a"), ALL), (_policy("b"), ALL)], nodes, pods)
    assert {u.node for u in plans["a"].unremovable} == {"n0"}
    assert {u.node for u in plans["b"].unremovable} == {"n1"}


def test_the_evictors_label_selector_decides_what_may_move() -> None:
    # Under a policy whose evictor admits only tier=web, a node that also runs a worker
    # can never be emptied by its descheduler: the worker blocks it.
    web_only = _policy("a", defaultEvictor={"labelSelector": {"matchLabels": {
        "tier": "web"}}})
    nodes = [node(f"n{i}") for i in range(3)]
    pods = [p for i in range(3) for p in (
        _team(f"web{i}", f"n{i}", "team-a", labels={"tier": "web"}),
        _team(f"worker{i}", f"n{i}", "team-a", labels={"tier": "worker"}))]
    (plan,) = _plans([(web_only, ALL)], nodes, pods).values()
    assert plan.freeable == plan.draining == ()
    assert {u.reasons[0].code for u in plan.unremovable} == {"evictor_selector"}
    only_web = [p for p in pods if p.labels["tier"] == "web"]
    (plan,) = _eventual([(web_only, ALL)], nodes, only_web).values()
    assert len(plan.freeable) == 2


def test_number_of_nodes_counts_only_nodes_that_may_be_sources() -> None:
    # Three nodes under the thresholds, but one is not ready and one is being removed:
    # one possible source is not more than numberOfNodes 1.
    policy = _policy("a", highNodeUtilization={"numberOfNodes": 1, "thresholds": {
        "cpu": 80, "memory": 80, "pods": 80}})
    nodes = [node("n0"), replace(node("n1"), ready=False),
             node("n2", taints=[Taint("karpenter.sh/disrupted", "", "NoSchedule")])]
    pods = [_team(f"a{i}", f"n{i}", "team-a") for i in range(3)]
    (plan,) = _plans([(policy, ALL)], nodes, pods).values()
    assert plan.draining == ()
    assert "only 1 underutilized nodes; numberOfNodes is 1" in _reasons(plan, "n0")



def test_a_node_freed_later_that_ties_with_a_drains_destination_waits_for_that_drain() -> None:
    """Three like nodes with one like Pod each: n0's Pod goes to n1, and n2 scores as high as
    n1 for it. The compaction scheduler breaks that tie at random, so n2, which the plan
    would free next, waits until n0's drain has ended; the pass after frees it."""
    nodes = [node(f"n{i}") for i in range(3)]
    pods = [_team(f"a{i}", f"n{i}", "team-a") for i in range(3)]
    (plan,) = _plans([(_policy("a"), ALL)], nodes, pods).values()
    assert plan.draining == plan.freeable == ("n0",)
    assert plan.moves == {("team-a", "a0"): "n1"}
    (reason,) = [r for u in plan.unremovable if u.node == "n2" for r in u.reasons]
    assert reason.code == "attracted" and "as high as n1" in reason.text
    (forecast,) = _eventual([(_policy("a"), ALL)], nodes, pods).values()
    assert forecast.freeable == ("n0", "n2") and forecast.draining == ("n0",)
