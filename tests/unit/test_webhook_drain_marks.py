"""The drain marks the extender reads: which departure each new Pod replaces, and so which
node it scores (pure; the watch events are built here as the API server sends them)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.drain_marks import DrainMarks
from webhook.errors import MalformedExtenderArgs
from webhook.extender import prioritize

RS_A = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "a", "uid": "rs-a",
        "controller": True}
RS_B = {**RS_A, "name": "b", "uid": "rs-b"}


def pod(uid: str, owner: dict[str, Any] | None = RS_A, planned: str | None = "dense",
        terminating: bool = False, namespace: str = "team") -> dict[str, Any]:
    meta: dict[str, Any] = {"uid": uid, "namespace": namespace, "name": f"p-{uid}"}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    if planned is not None:
        meta["annotations"] = {"compactor.dev/planned-node": planned}
    if terminating:
        meta["deletionTimestamp"] = "2026-12-07T00:00:00Z"
    return {"metadata": meta}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def marks() -> tuple[DrainMarks, Clock]:
    clock = Clock()
    return DrainMarks(clock=clock, synced=True), clock


EVERY_NODE = frozenset({"dense", "n1", "n2"})


def new_pod(uid: str, owner: dict[str, Any] = RS_A
            ) -> tuple[str, tuple[str, str], frozenset[str]]:
    """A new Pod of ``owner`` as the scheduler asks about it, every node a candidate."""
    return uid, ("team", str(owner["uid"])), EVERY_NODE


def test_a_marked_pod_is_no_departure_until_it_terminates() -> None:
    m, _ = marks()
    m.apply("ADDED", pod("old"))
    assert m.planned_node(*new_pod("scale-up")) is None
    m.apply("MODIFIED", pod("old", terminating=True))
    assert m.planned_node(*new_pod("replacement")) == "dense"


def test_departures_are_taken_oldest_first_each_once_and_kept_by_the_pod_that_took_it() -> None:
    m, clock = marks()
    m.apply("MODIFIED", pod("first", planned="n1", terminating=True))
    clock.now += 1
    m.apply("MODIFIED", pod("second", planned="n2", terminating=True))
    assert m.planned_node(*new_pod("r1")) == "n1"
    # Scored again (a failed bind, say): the same departure, not the next one.
    assert m.planned_node(*new_pod("r1")) == "n1"
    assert m.planned_node(*new_pod("r2")) == "n2"
    assert m.planned_node(*new_pod("r3")) is None


def test_a_departure_is_recorded_once_however_often_its_pod_is_seen_terminating() -> None:
    m, _ = marks()
    for event in ("MODIFIED", "MODIFIED", "ADDED"):
        m.apply(event, pod("old", terminating=True))
    m.apply("DELETED", pod("old", terminating=True))
    assert m.planned_node(*new_pod("r1")) == "dense"
    m.apply("MODIFIED", pod("old", terminating=True))
    assert m.planned_node(*new_pod("r2")) is None


@pytest.mark.parametrize(("new", "why"), [
    (("r", ("team", "rs-b"), EVERY_NODE), "another controller's Pod"),
    (("r", ("other", "rs-a"), EVERY_NODE), "the same uid in another namespace"),
    (("r", None, EVERY_NODE), "a Pod no controller replaces"),
])
def test_only_a_pod_of_the_same_controller_takes_a_departure(
        new: tuple[str, tuple[str, str] | None, frozenset[str]], why: str) -> None:
    m, _ = marks()
    m.apply("MODIFIED", pod("old", terminating=True))
    assert m.planned_node(*new) is None, why


def test_a_departure_whose_node_is_no_candidate_is_passed_over_and_kept() -> None:
    """A replacement the scheduler placed without asking (one feasible node) left its
    departure behind; the next Pod takes the oldest whose planned node it may still go to."""
    m, clock = marks()
    m.apply("MODIFIED", pod("first", planned="n1", terminating=True))
    clock.now += 1
    m.apply("MODIFIED", pod("second", planned="n2", terminating=True))
    owner = ("team", "rs-a")
    assert m.planned_node("r1", owner, {"n2", "dense"}) == "n2"
    # None of its departures' nodes is a candidate: it names the oldest's and takes nothing.
    assert m.planned_node("r2", owner, {"dense"}) == "n1"
    assert m.planned_node("r3", owner, {"n1"}) == "n1"
    assert m.planned_node("r4", owner, EVERY_NODE) is None


def test_a_mark_that_leaves_the_watch_before_terminating_is_dropped() -> None:
    """The label was taken off (the drain ended), or the Pod was deleted at once: the watch's
    DELETED event carries the object as it last matched, so both look alike; neither is a
    departure the plan still stands behind."""
    m, _ = marks()
    m.apply("ADDED", pod("old"))
    m.apply("DELETED", pod("old"))
    assert m.size() == 0
    assert m.planned_node(*new_pod("r")) is None


@pytest.mark.parametrize("seen", [
    pod("p", owner=None, terminating=True),
    pod("p", owner={**RS_A, "controller": False}, terminating=True),
    pod("p", planned=None, terminating=True),
    pod("p", planned="", terminating=True),
])
def test_a_pod_without_a_controller_or_planned_node_is_no_departure(seen: dict[str, Any]) -> None:
    m, _ = marks()
    m.apply("MODIFIED", seen)
    assert m.planned_node(*new_pod("r")) is None


def test_departures_and_takings_are_forgotten_after_the_wait() -> None:
    m, clock = marks()
    m.apply("MODIFIED", pod("a", planned="n1", terminating=True))
    assert m.planned_node(*new_pod("r1")) == "n1"
    m.apply("MODIFIED", pod("b", planned="n2", terminating=True))
    clock.now += m.wait
    assert m.planned_node(*new_pod("r2")) is None
    assert m.planned_node(*new_pod("r1")) is None


def test_a_relist_keeps_the_departures_already_seen() -> None:
    m, _ = marks()
    m.apply("MODIFIED", pod("gone", planned="n1", terminating=True))
    m.replace([pod("still", planned="n2")])
    assert m.size() == 1
    assert m.planned_node(*new_pod("r")) == "n1"


def args(uid: str, owner: dict[str, Any], nodes: list[str], by_name: bool = True) -> bytes:
    body: dict[str, Any] = {"Pod": {"metadata": {
        "uid": uid, "namespace": "team", "ownerReferences": [owner]}}}
    if by_name:
        body["NodeNames"] = nodes
    else:
        body["Nodes"] = {"items": [{"metadata": {"name": n}} for n in nodes]}
    return orjson.dumps(body)


@pytest.mark.parametrize("by_name", [True, False])
def test_prioritize_scores_the_planned_node_alone_when_it_is_a_candidate(by_name: bool) -> None:
    m, _ = marks()
    m.apply("MODIFIED", pod("old", planned="n2", terminating=True))
    out, outcome = prioritize(args("r", RS_A, ["n1", "n2", "n3"], by_name), m)
    assert orjson.loads(out) == [{"Host": "n1", "Score": 0}, {"Host": "n2", "Score": 10},
                                 {"Host": "n3", "Score": 0}]
    assert outcome == "planned"


def test_prioritize_scores_nothing_when_the_planned_node_is_no_candidate_or_none_is() -> None:
    m, _ = marks()
    m.apply("MODIFIED", pod("old", planned="full", terminating=True))
    out, outcome = prioritize(args("r", RS_A, ["n1"]), m)
    assert (orjson.loads(out), outcome) == ([{"Host": "n1", "Score": 0}], "elsewhere")
    out, outcome = prioritize(args("s", RS_B, ["n1"]), m)
    assert (orjson.loads(out), outcome) == ([{"Host": "n1", "Score": 0}], "none")


@pytest.mark.parametrize("body", [
    b"not json", b"[]", b'{"NodeNames": ["n1"]}', b'{"Pod": {}}', b'{"Pod": 3, "NodeNames": []}',
    b'{"Pod": {"metadata": 3}, "NodeNames": []}', b'{"Pod": {}, "Nodes": 3}',
])
def test_prioritize_refuses_what_is_no_extender_args(body: bytes) -> None:
    with pytest.raises(MalformedExtenderArgs):
        prioritize(body, marks()[0])


JSON_LEAVES = st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(max_size=5)


@given(st.recursive(JSON_LEAVES,
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.sampled_from(["Pod", "NodeNames", "Nodes", "items",
                                                       "metadata", "name", "uid",
                                                       "ownerReferences", "controller"]),
                                      inner, max_size=4),
                    max_leaves=12))
def test_prioritize_answers_a_host_list_or_refuses_whatever_it_is_sent(body: Any) -> None:
    try:
        out, _ = prioritize(orjson.dumps(body), marks()[0])
    except MalformedExtenderArgs:
        return
    assert all(set(h) == {"Host", "Score"} for h in orjson.loads(out))
