"""The preview's forecast: the passes' plans one after the other, and what the runtime hook's
replacements free themselves."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from controller.drain_planner.drain_plan import DrainPlan
from controller.plan.forecast import eventually, played_out, with_replacements
from controller.snapshot.pod import PodInfo


def _pod(name: str, node: str) -> PodInfo:
    return PodInfo("shop", name, f"u-{name}", owner=("ReplicaSet", "web-1"), node_name=node,
                   phase="Running", ready=True)


def test_each_plan_is_played_out_and_the_next_made_until_nothing_more_is_freed() -> None:
    pods = [_pod("a", "n0"), _pod("b", "n1"), _pod("c", "n2")]
    seen: list[set[str]] = []

    def choose(now: Sequence[PodInfo]) -> list[DrainPlan]:
        where = {p.name: p.node_name for p in now}
        seen.append(set(where.values()))
        if where["a"] == "n0":  # the first pass frees n0 and holds n1 back
            return [DrainPlan("p", freeable=("n0",), draining=("n0",),
                              moves={("shop", "a"): "n2"}, costs={"n0": 1})]
        if where["b"] == "n1":
            return [DrainPlan("p", freeable=("n1",), moves={("shop", "b"): "n2"},
                              costs={"n1": 1})]
        return [DrainPlan("p")]

    (plan,) = eventually(choose, pods)
    assert plan.freeable == ("n0", "n1") and plan.draining == ("n0",)
    assert plan.moves == {("shop", "a"): "n2", ("shop", "b"): "n2"}
    assert plan.costs == {"n0": 1, "n1": 1}  # each node's cost, from the plan that frees it
    assert seen == [{"n0", "n1", "n2"}, {"n1", "n2"}, {"n2"}]
    assert [p.node_name for p in played_out(pods, [plan])] == ["n2", "n2", "n2"]


def test_the_nodes_the_replacements_empty_are_freed_by_the_policy_whose_pods_left() -> None:
    before = [_pod("a", "n0"), _pod("b", "n1"), _pod("c", "n1")]
    after = [replace(before[0], node_name="n1"), *before[1:]]
    plans = [DrainPlan("p", nodes_in_use=("n1",)), DrainPlan("q", nodes_in_use=("n1",))]
    p, q = with_replacements(before, after, plans, {("shop", "a"): "p"})
    assert p.freeable == ("n0",) and p.moves == {("shop", "a"): "n1"}
    assert p.costs == {"n0": 1}  # the replacement was an eviction
    assert p.nodes_in_use == ("n0", "n1")
    assert q == plans[1]
