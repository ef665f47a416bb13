"""The planner beside Karpenter, as table tests of the pure planner: a node Karpenter is
disrupting (its ``karpenter.sh/disrupted`` NoSchedule taint) is neither a source nor a
destination, and a Pod annotated ``karpenter.sh/do-not-disrupt: "true"`` blocks its node with
its own reason."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from controller.drain_planner.drain_plan import DrainPlan
from controller.drain_planner.taint import drain_taint
from controller.snapshot.constraints import Taint
from controller.snapshot.node import NodeInfo
from controller.snapshot.pod import PodInfo
from tests.unit.controller.drain_planner.test_planner import NOW, node
from tests.unit.controller.drain_planner.test_planner_policies import ALL, _plans, _policy, _team

# What Karpenter's disruption and termination controllers put on a node they take away
# (sigs.k8s.io/karpenter pkg/apis/v1 DisruptedNoScheduleTaint).
DISRUPTED = Taint("karpenter.sh/disrupted", "", "NoSchedule")
DO_NOT_DISRUPT = {"karpenter.sh/do-not-disrupt": "true"}


def _plan(nodes: Sequence[NodeInfo], pods: Sequence[PodInfo]) -> DrainPlan:
    (plan,) = _plans([(_policy("a"), ALL)], nodes, pods).values()
    return plan


def _codes(plan: DrainPlan, name: str) -> set[str]:
    return {r.code for u in (*plan.unremovable, *plan.abandoned) if u.node == name
            for r in u.reasons}


# n0 is small and nearly empty (the first candidate), n1 and n2 have room for its Pod.
NODES = [node("n0"), node("n1"), node("n2")]
PODS = [_team("a0", "n0", "team-a", 0.5), _team("a1", "n1", "team-a", 1),
        _team("a2", "n2", "team-a", 2.5)]


def _disrupted(*names: str) -> list[NodeInfo]:
    return [NodeInfo(n.name, n.labels, n.allocatable, (*n.taints, DISRUPTED))
            if n.name in names else n for n in NODES]


@pytest.mark.parametrize(("disrupted", "freeable", "codes"), [
    pytest.param((), ("n0", "n1"), {}, id="none"),
    pytest.param(("n0",), ("n1",), {"n0": "leaving"}, id="the-candidate-is-no-source"),
    # n2 cannot take n1's Pod while Karpenter removes it, so n1's only room is n0.
    pytest.param(("n2",), ("n0",), {"n2": "leaving", "n1": "destination"},
                 id="a-disrupted-node-is-no-destination"),
    pytest.param(("n1", "n2"), (), {"n0": "does_not_fit", "n1": "leaving", "n2": "leaving"},
                 id="nowhere-to-go"),
])
def test_a_node_karpenter_disrupts_is_neither_source_nor_destination(
        disrupted: tuple[str, ...], freeable: tuple[str, ...], codes: dict[str, str]) -> None:
    plan = _plan(_disrupted(*disrupted), PODS)
    assert plan.freeable == freeable
    assert not set(plan.moves.values()) & set(disrupted)
    for name, code in codes.items():
        assert code in _codes(plan, name), (name, plan.unremovable)


def test_a_drain_under_way_is_abandoned_once_karpenter_disrupts_the_node() -> None:
    ours = drain_taint("a", NOW)
    nodes = [NodeInfo(n.name, n.labels, n.allocatable, (ours, DISRUPTED))
             if n.name == "n0" else n for n in NODES]
    plan = _plan(nodes, PODS)
    assert "n0" not in plan.freeable and "n0" not in plan.draining
    assert [u.reasons[0].code for u in plan.abandoned if u.node == "n0"] == ["leaving"]


@pytest.mark.parametrize(("annotations", "code"), [
    pytest.param(DO_NOT_DISRUPT, "do_not_disrupt", id="true"),
    pytest.param({"karpenter.sh/do-not-disrupt": "false"}, None, id="false"),
    pytest.param({"karpenter.sh/do-not-disrupt": ""}, None, id="empty"),
    pytest.param({**DO_NOT_DISRUPT, "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
                 "safe_to_evict", id="safe-to-evict-named-first"),
])
def test_do_not_disrupt_blocks_its_node_with_its_own_reason(
        annotations: dict[str, str], code: str | None) -> None:
    pods = [_team("a0", "n0", "team-a", 0.5, annotations=annotations), *PODS[1:]]
    plan = _plan(NODES, pods)
    if code is None:
        assert "n0" in plan.freeable
        return
    assert "n0" not in plan.freeable and not any(k[1] == "a0" for k in plan.moves)
    (verdict,) = (u for u in plan.unremovable if u.node == "n0")
    assert verdict.reasons[0].code == code
    if code == "do_not_disrupt":
        assert verdict.reasons[0].text == \
            "pod team-a/a0 is annotated karpenter.sh/do-not-disrupt"
