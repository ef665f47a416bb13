"""The demo's eviction record: evictions by any actor read off Pod states, and which of them
came back to the node they left."""

from __future__ import annotations

from typing import Any

import pytest

from localcluster.demo.evictions import (
    Arrival,
    Eviction,
    PodLog,
    among,
    by_workload,
    came_back,
)


def pod(uid: str, name: str, node: str = "", app: str = "web", ns: str = "production",
        evicted: bool = False) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True"}]
    if evicted:
        conditions.append({"type": "DisruptionTarget", "status": "True",
                           "reason": "EvictionByEvictionAPI"})
    return {"metadata": {"uid": uid, "name": name, "namespace": ns, "labels": {"app": app}},
            "spec": {"nodeName": node}, "status": {"conditions": conditions}}


def test_a_pod_arrives_once_with_the_node_it_was_first_bound_to() -> None:
    log = PodLog().seen(pod("u1", "web-1"), 3).seen(pod("u1", "web-1", "n1"), 4)
    log = log.seen(pod("u1", "web-1", "n2"), 5)
    assert log.arrivals == {"u1": Arrival(3, "production", "web", "n1")}
    assert log.evictions == ()


def test_an_eviction_is_recorded_once_with_the_node_left() -> None:
    log = PodLog().seen(pod("u1", "web-1", "n1"), 0)
    log = log.seen(pod("u1", "web-1", "n1", evicted=True), 7)
    log = log.seen(pod("u1", "web-1", "n1", evicted=True), 8)  # then DELETED, same state
    assert log.evictions == (Eviction(7, "production", "web-1", "web", "n1"),)


def test_a_deletion_without_the_eviction_condition_is_no_eviction() -> None:
    other = pod("u1", "web-1", "n1")
    other["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True",
                                          "reason": "PreemptionByScheduler"})
    assert PodLog().seen(other, 1).evictions == ()


def ev(seq: int, node: str, app: str = "web", name: str = "") -> Eviction:
    return Eviction(seq, "production", name or f"{app}-{seq}", app, node)


def arr(seq: int, node: str, app: str = "web") -> Arrival:
    return Arrival(seq, "production", app, node)


@pytest.mark.parametrize(("evictions", "arrivals", "back"), [
    pytest.param([ev(5, "n1")], [arr(0, "n1"), arr(6, "n1")], [5],
                 id="the replacement lands on the node left"),
    pytest.param([ev(5, "n1")], [arr(0, "n1"), arr(6, "n2")], [],
                 id="the replacement lands elsewhere"),
    pytest.param([ev(5, "n1")], [arr(4, "n1")], [],
                 id="a Pod seen before the eviction is no replacement"),
    pytest.param([ev(5, "n1")], [arr(6, "n1", app="api")], [],
                 id="another workload's Pod is no replacement"),
    pytest.param([ev(5, "n1"), ev(7, "n2")], [arr(6, "n2"), arr(8, "n1")], [],
                 id="each eviction takes the first replacement after it"),
    pytest.param([ev(5, "n1"), ev(6, "n2")], [arr(7, "n1"), arr(8, "n2")], [5, 6],
                 id="two evictions before either replacement: in order"),
    pytest.param([ev(5, "n1")], [arr(6, "")], [],
                 id="a replacement never bound did not come back"),
    pytest.param([ev(5, "")], [arr(6, "")], [],
                 id="an eviction of an unbound Pod"),
])
def test_came_back(evictions: list[Eviction], arrivals: list[Arrival], back: list[int]
                   ) -> None:
    assert [e.seq for e in came_back(evictions, arrivals)] == back


def test_by_workload_and_among_the_descheduler_s_own() -> None:
    back = [ev(1, "n1", name="web-a"), ev(2, "n1", name="web-b"),
            ev(3, "n2", app="cache", name="cache-0")]
    assert by_workload(back) == {"production/cache": 1, "production/web": 2}
    made = [("production/web-a", "n1"), ("production/cache-0", "n3"),
            ("production/web-a", "n1")]
    assert among(back, made) == 1
