"""The drain taint's life as table tests of ``plan``: a snapshot in, the node patches and
events out. A node keeps its policy's taint while the plan holds and loses it, with the other
taints left as they are, when it is empty, the plan no longer holds, the policy or its
descheduler goes, or the drain times out."""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

import pytest

from controller.drain_planner.taint import drain_taint
from controller.plan.actions import Patch, Plan, RecordEvent
from controller.plan.between_passes import Memory
from controller.plan.decide import plan
from controller.snapshot.constraints import Constraints, Taint
from controller.snapshot.node import NodeInfo
from controller.snapshot.pod import PodInfo
from tests.unit.controller.plan.test_decide import (
    ANNOTATED,
    NOW,
    RS,
    SETTINGS,
    _deploy,
    _policy,
    _snapshot,
)

LABELLED_POD = {"compactor.dev/policy": "p", "compactor.dev/workload-kind": "Deployment"}
ALLOCATABLE = {"cpu": 4000, "memory": 16 * 2**30 * 1000, "pods": 110_000}
OTHER = Taint("dedicated", "batch", "PreferNoSchedule")


def _pod(name: str, node: str, cpu: int, **extra: Any) -> PodInfo:
    return PodInfo("shop", name, f"u-{name}", dict(LABELLED_POD),
                   {**ANNOTATED, **extra.pop("annotations", {})}, ("ReplicaSet", "web-1"),
                   node_name=node, phase="Running", ready=True,
                   scheduler_name="compactor-scheduler",
                   requests={"cpu": cpu, "memory": 64 * 2**20 * 1000}, **extra)


def _nodes(since: datetime.datetime = NOW) -> tuple[NodeInfo, ...]:
    return (NodeInfo("dense", {}, ALLOCATABLE, uid="n-dense"),
            NodeInfo("sparse", {}, ALLOCATABLE, (OTHER, drain_taint("p", since)),
                     uid="n-sparse"))


SETTLED = (_pod("d1", "dense", 2000), _pod("s1", "sparse", 200))


def _pass(pods: tuple[PodInfo, ...] = SETTLED, nodes: tuple[NodeInfo, ...] | None = None,
          policies: tuple[Any, ...] | None = None, memory: Memory | None = None,
          at: datetime.datetime = NOW) -> Plan:
    return plan(_snapshot(nodes=nodes or _nodes(), owners=(RS,),
                          policies=(_policy(),) if policies is None else policies,
                          workloads=(_deploy({"compactor.dev/policy": "p"}, ANNOTATED),),
                          pods=pods), SETTINGS, at, memory)


def _node_patches(p: Plan) -> dict[str, Patch]:
    return {a.path.rsplit("/", 1)[1]: a for a in p.of(Patch)
            if a.path.startswith("/api/v1/nodes/")}


def _taints_after(patch: Patch) -> list[dict[str, Any]]:
    (replace,) = [op for op in patch.body if op["op"] == "replace"]
    return list(replace["value"])


def _reasons(events: tuple[Any, ...]) -> list[str]:
    return [e.body["reason"] for e in events if isinstance(e, RecordEvent)]


def test_a_drain_that_still_holds_keeps_its_taint_and_is_not_patched() -> None:
    p = _pass()
    assert p.drains[0].draining == ("sparse",)
    assert _node_patches(p) == {}


@pytest.mark.parametrize(("case", "pods", "nodes", "policies", "event"), [
    pytest.param("empty", SETTLED[:1], None, None, "NodeDrained", id="empty-of-movable-pods"),
    pytest.param("no-longer-fits", (_pod("d1", "dense", 3900), SETTLED[1]), None, None,
                 "NodeNotConsolidatable", id="a-pod-no-longer-fits"),
    pytest.param("blocker", (SETTLED[0], _pod("s1", "sparse", 200, annotations={
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"})), None, None,
        "NodeNotConsolidatable", id="a-blocker-appeared"),
    pytest.param("timed-out", SETTLED, _nodes(NOW - datetime.timedelta(hours=7)), None,
                 "NodeNotConsolidatable", id="timed-out"),
    pytest.param("policy-gone", SETTLED, None, (), None, id="policy-deleted"),
    pytest.param("policy-disabled", SETTLED, None, (_policy(enabled=False),), None,
                 id="policy-disabled"),
    pytest.param("descheduler-disabled", SETTLED, None,
                 (_policy(descheduler={"enabled": False}),), None, id="descheduler-disabled"),
])
def test_the_taint_goes_and_only_ours(case: str, pods: tuple[PodInfo, ...],
                                      nodes: tuple[NodeInfo, ...] | None,
                                      policies: tuple[Any, ...] | None,
                                      event: str | None) -> None:
    p = _pass(pods, nodes, policies)
    patches = _node_patches(p)
    assert set(patches) == {"sparse"}, case
    patch = patches["sparse"]
    # Guarded by the taints read, so a taint someone added meanwhile is never lost.
    assert patch.body[0]["op"] == "test" and patch.patch_type == "json"
    assert _taints_after(patch) == [OTHER.render()]
    if event is None:
        assert "NodeDrained" not in _reasons(patch.then)
    else:
        assert event in _reasons(patch.then), patch.then
        if event == "NodeNotConsolidatable":
            messages = [e.body["message"] for e in patch.then if isinstance(e, RecordEvent)]
            assert all("drain stopped" in m for m in messages)
            # On the node and on the policy.
            assert {e.body["involvedObject"]["kind"] for e in patch.then
                    if isinstance(e, RecordEvent)} == {"Node", "ClusterCompactionPolicy"}


def test_a_dry_run_shows_the_plan_and_taints_nothing() -> None:
    untainted = (NodeInfo("dense", {}, ALLOCATABLE), NodeInfo("sparse", {}, ALLOCATABLE))
    dry = _pass(nodes=untainted, policies=(_policy(descheduler={"enabled": False}),))
    assert dry.drains[0].freeable == ("sparse",) and dry.drains[0].draining == ()
    assert _node_patches(dry) == {}
    assert not any("compactor.dev/draining" in str(a.body) for a in dry.of(Patch))
    live = _pass(nodes=untainted)
    assert set(_node_patches(live)) == {"sparse"}
    (added,) = [op for op in _node_patches(live)["sparse"].body if op["op"] == "add"]
    assert added["value"][0]["key"] == "compactor.dev/drain"
    assert added["value"][0]["value"] == "p"
    assert added["value"][0]["effect"] == "PreferNoSchedule"


def _untainted() -> tuple[NodeInfo, ...]:
    return (NodeInfo("dense", {}, ALLOCATABLE, uid="n-dense"),
            NodeInfo("sparse", {}, ALLOCATABLE, uid="n-sparse"))


@pytest.mark.parametrize(("extra", "held"), [
    # Its node lost the label it selects: its replacement goes to "sparse". But "dense" stays
    # in use whatever moves, so the hook leaves it alone.
    pytest.param({"constraints": Constraints(node_selector={"pool": "b"})}, False,
                 id="a-pod-of-a-node-the-plan-keeps-is-left-alone"),
    # On the node the plan frees, its replacement goes to "dense": the hook replaces it first.
    pytest.param({"node_name": "sparse"}, True, id="a-pod-the-hook-will-replace-holds-new-drains"),
    # "dense" is the compaction scheduler's choice for it too: replacing it is futile.
    pytest.param({}, False, id="a-pod-whose-replacement-comes-back-is-left-alone"),
    pytest.param({"local_storage": True}, False, id="local-storage-never-replaced"),
    pytest.param({"annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}},
                 False, id="safe-to-evict-never-replaced"),
    pytest.param({"pvc": True}, False, id="pvc-never-replaced"),
    # The hook waits for its workload to be back at full strength: a Pod of it not Ready for
    # longer than a rollout takes means it never will be, and must not hold the drains...
    pytest.param({"node_name": "sparse", "unready": NOW - datetime.timedelta(hours=1)}, False,
                 id="a-workload-that-never-settles-holds-nothing"),
    # ... while one coming up (a replacement, a rollout) does.
    pytest.param({"node_name": "sparse", "unready": NOW - datetime.timedelta(seconds=30)},
                 True, id="a-workload-coming-up-holds-new-drains"),
])
def test_only_pods_the_runtime_hook_would_replace_hold_new_drains(
        extra: dict[str, Any], held: bool) -> None:
    # A Running Pod admitted before the policy (no intent, default scheduler) on the dense
    # node. The hook replaces it unless a skip rule holds; one it never replaces must not
    # keep the policy from draining for ever.
    since = extra.pop("unready", None)  # another Pod of the workload, not Ready since then
    stale = PodInfo("shop", "old", "u-old", {}, extra.pop("annotations", {}),
                    ("ReplicaSet", "web-1"), node_name=extra.pop("node_name", "dense"),
                    phase="Running", ready=True, requests={"cpu": 100, "memory": 64 * 2**20 * 1000},
                    **extra)
    unready = (() if since is None else
               (replace(_pod("new", "dense", 100), ready=False, created=since),))
    nodes = (_untainted()[0], replace(_untainted()[1], labels={"pool": "b"}))
    p = _pass((*SETTLED, stale, *unready), nodes, (_policy(setLabelsByEviction=True),))
    assert p.drains[0].freeable == ("sparse",)
    assert p.drains[0].draining == (() if held else ("sparse",))


def test_a_marked_pod_carries_the_node_the_plan_sends_it_to_and_loses_both_marks_after(
        ) -> None:
    p = _pass(nodes=_untainted())
    (patch,) = [a for a in p.of(Patch) if a.path.endswith("/pods/s1")]
    assert patch.body["metadata"]["labels"]["compactor.dev/draining"] == "p"
    assert patch.body["metadata"]["annotations"]["compactor.dev/planned-node"] == "dense"
    marked = replace(SETTLED[1], labels={**SETTLED[1].labels, "compactor.dev/draining": "p"},
                     annotations={**SETTLED[1].annotations,
                                  "compactor.dev/planned-node": "dense"})
    # The drain abandoned (a blocker appeared): the mark and the planned node go together.
    blocked = _pod("b", "sparse", 100, annotations={
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"})
    p = _pass((SETTLED[0], marked, blocked))
    (patch,) = [a for a in p.of(Patch) if a.path.endswith("/pods/s1")]
    assert patch.body["metadata"]["labels"]["compactor.dev/draining"] is None
    assert patch.body["metadata"]["annotations"]["compactor.dev/planned-node"] is None
