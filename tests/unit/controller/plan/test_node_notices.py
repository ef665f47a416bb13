"""Why a node stays, told on the Node, as table tests of the pure rule: the plan's verdicts
and the Node Events this controller wrote in, the Events to write out. An Event is written
only when the reason differs from what was said last; a reason said before is that Event once
more (its count moves), as client-go aggregates."""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

import pytest

from compaction.selector import LabelSelector, Operator, requirement
from controller.drain_planner.drain_plan import DrainPlan, Unremovable
from controller.drain_planner.planner import choose_drains
from controller.drain_planner.reasons import Code, Reason
from controller.plan.actions import RecordEvent
from controller.plan.decide import plan
from controller.plan.node_notices import KEPT, event_name, kept, notices
from controller.snapshot.event import NodeEvent, parse_node_event
from controller.snapshot.node import NodeInfo
from controller.snapshot.pdb import PdbInfo
from tests.unit.controller.drain_planner.test_planner import POLICY as PLANNER_POLICY
from tests.unit.controller.drain_planner.test_planner import managed, node, pod
from tests.unit.controller.plan.test_decide import (
    ANNOTATED,
    NOW,
    SETTINGS,
    _deploy,
    _policy,
    _snapshot,
)
from tests.unit.controller.plan.test_taint_life import ALLOCATABLE, _pod

PDB = Reason(Code.PDB, "PodDisruptionBudget shop/web allows 0 disruptions")
HOT = Reason(Code.ABOVE_THRESHOLDS, "above the 65% CPU threshold")
SAID_PDB = "PodDisruptionBudget shop/web allows 0 disruptions (pdb)"
SAID_HOT = "above the 65% CPU threshold (above_thresholds)"
NODES = (NodeInfo("n1", uid="uid-1"), NodeInfo("n2", uid="uid-2"))


def _drains(*kept: tuple[str, Reason, bool]) -> tuple[DrainPlan, ...]:
    return (DrainPlan("p", unremovable=tuple(Unremovable(n, (r,), holds)
                                             for n, r, holds in kept)),)


def _told(message: str, rv: str, node: str = "n1", uid: str = "uid-1", count: int = 1,
          reason: str = KEPT) -> NodeEvent:
    return NodeEvent(event_name(node, uid, message) if reason == KEPT else f"{node}.step{rv}",
                     node, uid, reason, message, count, "2026-12-01T11:00:00Z", rv)


def _summary(events: list[RecordEvent]) -> list[tuple[str, str, int, str]]:
    return [(e.body["involvedObject"]["name"], e.body["message"], e.body["count"], e.repeats)
            for e in events]


@pytest.mark.parametrize(("kept", "told", "expected"), [
    pytest.param([("n1", PDB, True)], [], [("n1", SAID_PDB, 1, "")], id="first-said"),
    pytest.param([("n1", PDB, True)], [_told(SAID_PDB, "7")], [], id="said-already"),
    pytest.param([("n1", PDB, False)], [], [], id="no-managed-pods-nothing-said"),
    pytest.param([("n1", HOT, True)], [_told(SAID_PDB, "7")], [("n1", SAID_HOT, 1, "")],
                 id="a-new-reason-is-a-new-event"),
    pytest.param([("n1", PDB, True)], [_told(SAID_PDB, "7", count=2), _told(SAID_HOT, "9")],
                 [("n1", SAID_PDB, 3, event_name("n1", "uid-1", SAID_PDB))],
                 id="a-reason-said-before-is-its-event-again"),
    pytest.param([("n1", PDB, True)], [_told(SAID_HOT, "9"), _told(SAID_PDB, "10")], [],
                 id="resource-versions-compare-as-numbers"),
    pytest.param([("n1", PDB, True)], [_told(SAID_PDB, "7"),
                                       _told("policy p: tainted", "8", reason="NodeDrainPlanned")],
                 [("n1", SAID_PDB, 2, event_name("n1", "uid-1", SAID_PDB))],
                 id="kept-again-after-a-drain-step"),
    pytest.param([("n1", PDB, True)], [_told(SAID_PDB, "7", uid="uid-old")],
                 [("n1", SAID_PDB, 1, "")], id="a-node-of-the-same-name-before-is-another"),
    pytest.param([("n1", PDB, True), ("n2", HOT, True)], [_told(SAID_PDB, "7")],
                 [("n2", SAID_HOT, 1, "")], id="each-node-apart"),
])
def test_a_node_is_told_why_it_stays_only_when_the_reason_changes(
        kept: list[tuple[str, Reason, bool]], told: list[NodeEvent],
        expected: list[tuple[str, str, int, str]]) -> None:
    assert _summary(notices(NODES, _drains(*kept), told, NOW)) == expected


def test_the_event_is_one_kubectl_describe_node_shows_and_the_next_pass_reads_back() -> None:
    (event,) = notices(NODES, _drains(("n1", PDB, True)), [], NOW)
    body = dict(event.body)
    assert event.namespace == "default" and event.repeats == ""
    assert body["involvedObject"] == {"kind": "Node", "name": "n1", "uid": "uid-1",
                                      "apiVersion": "v1"}
    assert (body["reason"], body["type"], body["message"]) == (KEPT, "Normal", SAID_PDB)
    assert body["metadata"] == {"name": event_name("n1", "uid-1", SAID_PDB),
                                "namespace": "default",
                                "labels": {"app.kubernetes.io/managed-by": "compactor"}}
    assert (body["count"], body["firstTimestamp"], body["lastTimestamp"]) == (
        1, "2026-12-01T12:00:00Z", "2026-12-01T12:00:00Z")
    # What the API server answers is the record the next pass reads, and it says nothing.
    stored = {**body, "metadata": {**body["metadata"], "resourceVersion": "12"}}
    told = parse_node_event(stored)
    assert told is not None and notices(NODES, _drains(("n1", PDB, True)), [told], NOW) == []


def test_said_again_moves_the_count_and_last_time_and_keeps_the_first() -> None:
    later = NOW + datetime.timedelta(minutes=5)
    told = [_told(SAID_PDB, "7", count=4), _told(SAID_HOT, "8")]
    (event,) = notices(NODES, _drains(("n1", PDB, True)), told, later)
    assert event.repeats == told[0].name
    assert event.again == {"count": 5, "lastTimestamp": "2026-12-01T12:05:00Z"}
    assert event.body["firstTimestamp"] == "2026-12-01T11:00:00Z"


def test_the_plan_marks_the_kept_nodes_that_hold_pods_of_a_policy() -> None:
    """A Pod of the policy that cannot move still makes its node one to tell; a node only
    unmanaged Pods hold is left alone."""
    pods = [pod("d1", "dense", 2), pod("s1", "held", labels={"app": "pay"}),
            pod("x", "unmanaged", ns="other")]
    budget = PdbInfo("shop", "pay", LabelSelector((requirement("app", Operator.IN, "pay"),)),
                     0)
    members = {**managed(*pods[:2]), **managed(pods[2], policy=None)}
    drains = choose_drains([(PLANNER_POLICY, LabelSelector())],
                           [node("dense"), node("held"), node("unmanaged")], pods, members,
                           [budget], NOW)
    assert {n: r.code for n, r in kept(drains).items()} == {"held": Code.PDB}
    assert {u.node for d in drains for u in d.unremovable} >= {"held", "unmanaged"}


def test_an_event_name_is_a_dns_subdomain_whatever_the_node_name() -> None:
    name = event_name("n" * 250 + "-x", "uid", "text")
    assert len(name) <= 253 and ".." not in name and name.split(".")[-1].isalnum()


def test_an_event_about_anything_but_a_node_is_not_read() -> None:
    assert parse_node_event({"involvedObject": {"kind": "Pod", "name": "x"}}) is None


def _kept_pass(spec: dict[str, Any], told: tuple[NodeEvent, ...] = ()) -> list[RecordEvent]:
    """A pass over a node whose Pod of policy p fits nowhere else."""
    nodes = (NodeInfo("dense", {}, ALLOCATABLE, uid="n-dense"),
             NodeInfo("sparse", {}, ALLOCATABLE, uid="n-sparse"))
    pods = (_pod("d1", "dense", 3000), _pod("s1", "sparse", 1500))
    p = plan(_snapshot(nodes=nodes, pods=pods, node_events=told,
                       policies=(_policy("p", **spec),),
                       workloads=(_deploy({"compactor.dev/policy": "p"}, ANNOTATED),)),
             SETTINGS, NOW)
    return [a for a in p.of(RecordEvent) if a.body["reason"] == KEPT]


def test_a_pass_tells_the_nodes_it_keeps_once_and_a_steady_pass_nothing() -> None:
    thresholds = {"descheduler": {"highNodeUtilization": {"thresholds": {
        "cpu": 80, "memory": 80, "pods": 80}}}}
    first = _kept_pass(thresholds)
    assert {e.body["involvedObject"]["name"] for e in first} == {"dense", "sparse"}
    assert all(e.body["message"].endswith("(does_not_fit)") for e in first), first
    # The next pass reads what the first wrote (a restarted controller reads the same).
    records = [parse_node_event(dict(e.body)) for e in first]
    told = tuple(replace(r, resource_version=str(10 + i)) for i, r in enumerate(records)
                 if r is not None)
    assert len(told) == 2
    assert _kept_pass(thresholds, told) == []
