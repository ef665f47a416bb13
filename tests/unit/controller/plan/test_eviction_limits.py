"""A workload's eviction budget and the rule against ping-pong through a whole pass, as table
tests of the pure plan: the snapshot (the workload's annotations, its Pods' ages) in, the
drains, the record written back and the Events out. Each pass starts from nothing but the
snapshot, as a restarted controller would."""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

import pytest

from compaction import names
from compaction.eviction_budget import Eviction, Evictions
from compaction.selector import LabelSelector
from controller.drain_planner.allowance import Allowance
from controller.drain_planner.reasons import Code, Reason
from controller.drain_planner.taint import drain_taint
from controller.plan.actions import Evict, Patch, Plan, RecordEvent
from controller.plan.between_passes import Memory
from controller.plan.decide import plan
from controller.plan.eviction_limits import after_moves
from controller.plan.runtime_hook import decide
from controller.snapshot.node import NodeInfo
from controller.snapshot.pod import PodInfo
from controller.snapshot.snapshot import Snapshot
from tests.unit.controller.plan.test_decide import (
    ANNOTATED,
    DEPLOY_PATH,
    LABELLED,
    NOW,
    SETTINGS,
    _deploy,
    _on,
    _policy,
    _snapshot,
)
from tests.unit.controller.plan.test_runtime_hook import POLICY as HOOK_POLICY
from tests.unit.controller.plan.test_runtime_hook import _settled_state
from tests.unit.controller.plan.test_runtime_hook import _workload as _hook_workload
from tests.unit.controller.plan.test_runtime_hook import pod as hook_pod

MINUTE = datetime.timedelta(minutes=1)
ALLOCATABLE = {"cpu": 4000, "memory": 16 * 2**30 * 1000, "pods": 110_000}
NODES = (NodeInfo("dense", {}, ALLOCATABLE), NodeInfo("s1", {}, ALLOCATABLE),
         NodeInfo("s2", {}, ALLOCATABLE))
OLD = NOW - 60 * MINUTE
PODS = (replace(_on("d1", "dense", True, 2000), created=OLD),
        replace(_on("a", "s1", True), created=OLD), replace(_on("b", "s2", True), created=OLD))


def _record(*entries: tuple[datetime.datetime, str], warned: str = "") -> str:
    return Evictions(tuple(Eviction(at, uid) for at, uid in entries), warned).render()


def _pass(annotations: dict[str, str], pods: tuple[PodInfo, ...] = PODS,
          now: datetime.datetime = NOW, **spec: Any) -> tuple[Plan, Snapshot]:
    snapshot = _snapshot(nodes=NODES, policies=(_policy(descheduler={
        "maxDrainingNodes": 2, **spec}),), workloads=(_deploy(
            LABELLED, {**ANNOTATED, **annotations}),), pods=pods)
    return plan(snapshot, SETTINGS, now), snapshot


def _records(p: Plan) -> list[Patch]:
    return [a for a in p.of(Patch) if a.path == DEPLOY_PATH
            and names.EVICTIONS_ANNOTATION in a.body["metadata"].get("annotations", {})]


def _written(p: Plan) -> Evictions:
    (patch,) = _records(p)
    return Evictions.parse(patch.body["metadata"]["annotations"][names.EVICTIONS_ANNOTATION])


def _workload_events(p: Plan) -> list[RecordEvent]:
    """The Events about the workload (the nodes kept have theirs)."""
    return [e for a in p.actions for e in (a, *getattr(a, "then", ()))
            if isinstance(e, RecordEvent) and e.body["involvedObject"]["kind"] == "Deployment"]


BUDGET = names.EVICTION_BUDGET_ANNOTATION
EVICTIONS = names.EVICTIONS_ANNOTATION


@pytest.mark.parametrize(("annotations", "now", "spec", "draining", "held"), [
    pytest.param({}, NOW, {}, {"s1", "s2"}, {}, id="no-budget"),
    pytest.param({BUDGET: "2/1h"}, NOW, {}, {"s1", "s2"}, {}, id="budget-with-room-for-both"),
    pytest.param({BUDGET: "1/1h"}, NOW, {}, {"s1"}, {}, id="budget-with-room-for-one"),
    pytest.param({BUDGET: "1/1h", EVICTIONS: _record((NOW - 10 * MINUTE, "gone"))}, NOW, {},
                 set(), {"eviction_budget": 3}, id="budget-spent-ten-minutes-ago"),
    pytest.param({BUDGET: "1/1h", EVICTIONS: _record((NOW - 70 * MINUTE, "gone"))}, NOW, {},
                 {"s1"}, {}, id="budget-spent-before-the-window"),
    pytest.param({BUDGET: "0/1h"}, NOW, {}, set(), {"eviction_budget": 3}, id="zero-budget"),
    pytest.param({BUDGET: "twice a day"}, NOW, {}, set(), {"eviction_budget": 3},
                 id="invalid-budget-evicts-nothing"),
    # "b" was created after Compactor's eviction of "gone": the replacement.
    pytest.param({EVICTIONS: _record((OLD - MINUTE, "gone"))}, OLD + 4 * MINUTE, {}, set(),
                 {"recently_replaced": 3}, id="replacements-within-the-interval"),
    pytest.param({EVICTIONS: _record((OLD - MINUTE, "gone"))}, OLD + 6 * MINUTE, {},
                 {"s1", "s2"}, {}, id="replacements-past-the-interval"),
    pytest.param({EVICTIONS: _record((OLD - MINUTE, "gone"))}, OLD + 4 * MINUTE,
                 {"evictReplacementsAfter": "0s"}, {"s1", "s2"}, {}, id="rule-turned-off"),
    pytest.param({EVICTIONS: _record((OLD - MINUTE, "gone"))}, OLD + 4 * MINUTE,
                 {"evictReplacementsAfter": "3m"}, {"s1", "s2"}, {}, id="shorter-interval"),
    pytest.param({EVICTIONS: _record((OLD + MINUTE, "gone"))}, OLD + 4 * MINUTE, {},
                 {"s1", "s2"}, {}, id="pods-older-than-the-eviction-are-no-replacements"),
])
def test_what_a_pass_drains(annotations: dict[str, str], now: datetime.datetime,
                            spec: dict[str, Any], draining: set[str],
                            held: dict[str, int]) -> None:
    p, _ = _pass(annotations, now=now, **spec)
    (drains,) = p.drains
    assert set(drains.draining) == draining
    assert p.held == held
    marked = {k for keys in drains.evict.values() for k in keys}
    if marked:  # every Pod marked is counted on the workload before it is marked
        assert {e.pod_uid for e in _written(p).entries} >= {f"u-{n}" for _, n in marked}
        first = p.actions.index(_records(p)[0])
        assert all(p.actions.index(a) > first for a in p.of(Patch)
                   if a.path.startswith("/api/v1/namespaces/shop/pods/"))


def test_the_count_survives_a_restart_and_a_withdrawn_mark_is_given_back() -> None:
    """Pass 1 marks "a" and counts it. A restarted controller reads the count back: "a",
    still marked, goes on; "b" waits for the window. Once "a" is gone unmarked for over a
    minute (its mark withdrawn), its eviction is given back."""
    first, _ = _pass({BUDGET: "1/1h"})
    record = _written(first)
    assert [e.pod_uid for e in record.entries] == ["u-a"]
    marked = replace(PODS[1], labels={**PODS[1].labels, names.DRAINING_LABEL: "p"})
    annotations = {BUDGET: "1/1h", EVICTIONS: record.render()}
    again, _ = _pass(annotations, (PODS[0], marked, PODS[2]), NOW + MINUTE)
    assert again.drains[0].draining == ("s1",) and _records(again) == []
    assert again.held == {"eviction_budget": 2}
    unmarked, _ = _pass(annotations, PODS, NOW + 2 * MINUTE)
    # Given back, then spent again on the node planned first: counted anew, from now.
    assert unmarked.drains[0].draining == ("s1",)
    assert [(e.pod_uid, e.at) for e in _written(unmarked).entries] == [
        ("u-a", NOW + 2 * MINUTE)]
    # Not yet a minute: "a" is still counted (a mark not yet seen in the cache, say).
    within, _ = _pass(annotations, PODS, NOW + MINUTE // 2)
    assert within.drains[0].draining == ("s1",) and _records(within) == []
    assert within.held == {"eviction_budget": 2}


def test_an_invalid_value_is_named_once_by_a_warning_event() -> None:
    first, _ = _pass({BUDGET: "1/fortnight"})
    (patch,) = _records(first)
    (event,) = patch.then
    assert isinstance(event, RecordEvent) and event.body["type"] == "Warning"
    assert event.body["reason"] == "EvictionBudgetInvalid"
    assert "'1/fortnight'" in event.body["message"]
    assert event.body["involvedObject"]["name"] == "web"
    warned = _written(first)
    assert warned.warned == "1/fortnight"
    # Said once: the passes after read that it was said.
    for minutes in (1, 2, 30):
        later, _ = _pass({BUDGET: "1/fortnight", EVICTIONS: warned.render()},
                         now=NOW + minutes * MINUTE)
        assert _records(later) == [] and _workload_events(later) == []
    # Another invalid value is named again; a valid one clears what was said.
    other, _ = _pass({BUDGET: "x", EVICTIONS: warned.render()})
    assert len(_records(other)[0].then) == 1
    fixed, _ = _pass({BUDGET: "1/1h", EVICTIONS: warned.render()})
    assert _written(fixed).warned == ""


def test_the_preview_holds_what_its_own_passes_moved_and_spends_their_budget() -> None:
    """Played out, a Pod a pass moved is a replacement: the passes after it do not move it
    again within evictReplacementsAfter, and its eviction is spent."""
    allowance = Allowance(budget_of={("shop", "a"): "web", ("shop", "b"): "web"},
                          left={"web": 2})
    after = after_moves(allowance, [("shop", "a")], {("shop", "a"): True})
    assert after.held[("shop", "a")].code is Code.RECENTLY_REPLACED
    assert after.budget_of == {("shop", "b"): "web"} and after.left == {"web": 1}
    unheld = after_moves(allowance, [("shop", "a")], {("shop", "a"): False})
    assert not unheld.held and unheld.left == {"web": 1}
    assert after_moves(allowance, [], {}) is allowance


HOOK_PODS = [hook_pod("a"), hook_pod("b")]


@pytest.mark.parametrize(("allowance", "room", "victim"), [
    pytest.param(Allowance(), None, "a", id="no-budget"),
    pytest.param(Allowance(), 1, "a", id="room-for-one"),
    pytest.param(Allowance(), 0, None, id="no-room"),
    pytest.param(Allowance(held={("shop", "a"): Reason(Code.RECENTLY_REPLACED, "")}), None,
                 "b", id="a-recent-replacement-is-passed-over"),
    pytest.param(Allowance(held={("shop", p): Reason(Code.EVICTION_BUDGET, "")
                                 for p in "ab"}), None, None, id="every-pod-held"),
])
def test_the_runtime_hook_under_the_allowance(allowance: Allowance, room: int | None,
                                              victim: str | None) -> None:
    decision = decide(_hook_workload(_settled_state()), HOOK_POLICY, HOOK_PODS, {"n1": {}},
                      LabelSelector(), Memory(), NOW, allowance=allowance, room=room)
    assert [a.name for a in decision.actions if isinstance(a, Evict)] == (
        [victim] if victim else [])


def test_a_hook_eviction_is_counted_before_it_is_made() -> None:
    snapshot = _snapshot(nodes=NODES, policies=(_policy(setLabelsByEviction=True),),
                         workloads=(replace(_deploy(LABELLED, {**ANNOTATED, **_settled_state(),
                                                              BUDGET: "1/1h"}), replicas=2),),
                         pods=(replace(_on("x", "s1", False), created=OLD),
                               replace(_on("y", "s2", False), created=OLD)))
    p = plan(snapshot, SETTINGS, NOW)
    (evict,) = p.of(Evict)
    (record,) = _records(p)
    assert p.actions.index(record) < p.actions.index(evict)
    assert _written(p).uids == {evict.pod_uid}


def test_a_held_pod_keeps_the_plan_reusable_from_pass_to_pass() -> None:
    """What the plan reads of a held Pod does not move with the clock: the next pass reuses
    the plan until the Pod is let go."""
    annotations = {EVICTIONS: _record((OLD - MINUTE, "gone"))}
    keys = [_pass(annotations, now=OLD + m * MINUTE)[0].drain_memo for m in (2, 3, 4)]
    held = {k.key for k in keys if k is not None}
    assert len(held) == 1 and None not in keys
    let_go, _ = _pass(annotations, now=OLD + 6 * MINUTE)
    assert let_go.drain_memo is not None and let_go.drain_memo.key not in held


def test_a_replacement_back_on_a_draining_node_waits_and_the_drain_goes_on() -> None:
    """The replacement of an evicted Pod came back to the node being drained: the drain goes
    on, but the replacement is not marked until it has run evictReplacementsAfter."""
    tainted = (NODES[0], replace(NODES[1], taints=(drain_taint("p", OLD),)), NODES[2])
    back = replace(PODS[1], created=OLD + MINUTE)  # on s1, after the eviction below
    snapshot = _snapshot(nodes=tainted, policies=(_policy(),), workloads=(_deploy(
        LABELLED, {**ANNOTATED, EVICTIONS: _record((OLD + MINUTE // 2, "gone"))}),),
        pods=(PODS[0], back, PODS[2]))
    p = plan(snapshot, SETTINGS, OLD + 2 * MINUTE)
    (drains,) = p.drains
    assert "s1" in drains.draining and drains.evict["s1"] == ()
    assert p.held == {"recently_replaced": 1}
    later = plan(snapshot, SETTINGS, OLD + 7 * MINUTE)
    assert later.drains[0].evict["s1"] == (("shop", "a"),) and later.held == {}


def test_a_pod_created_within_the_second_of_an_eviction_is_a_replacement_unless_it_was_there(
        ) -> None:
    """A Pod's creation is kept to the second: the record names the Pods already there in the
    second of the eviction, and only those are no replacements."""
    first, _ = _pass({}, (*PODS[:2], replace(PODS[2], created=NOW)))
    record = _written(first)
    assert all(e.at == NOW and e.peers == ("u-b",) for e in record.entries)
    fresh = replace(_on("b2", "s2", True), created=NOW)  # made in that second, after it
    later, _ = _pass({EVICTIONS: record.render()}, (*PODS[:2], replace(PODS[2], created=NOW),
                                                     fresh), NOW + MINUTE // 2)
    assert later.held == {"recently_replaced": 1}
    assert [u.reasons[0].text for u in later.drains[0].unremovable if u.node == "s2"] == [
        "pod shop/b2 replaced one Compactor evicted less than evictReplacementsAfter (5m) ago"]
