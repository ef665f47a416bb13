"""Carrying out a plan, with the API replaced by a recording stand-in (the boundary under test
is the executor's rules: order, follow-ups, tolerated answers, back-off, memory)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
from collections.abc import Callable
from typing import Any

import pytest

from controller.act.executor import Executor, batches
from controller.act.metrics import ControllerMetrics
from controller.kubeapi.client import ApiError
from controller.plan.actions import (
    Action,
    Apply,
    Create,
    Delete,
    Evict,
    Patch,
    Plan,
    RecordEvent,
    Target,
    WriteStatus,
)
from controller.plan.between_passes import Memory

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
WORKLOAD = "/apis/apps/v1/namespaces/shop/deployments/web"


class RecordingApi:
    """Answers every write; ``fail`` maps a path to the HTTP status it fails with."""

    def __init__(self, fail: dict[str, int] | None = None) -> None:
        self.fail = fail or {}
        self.calls: list[tuple[str, str]] = []

    def _answer(self, verb: str, path: str) -> None:
        self.calls.append((verb, path))
        if path in self.fail:
            raise ApiError(self.fail[path], "Failure", "scripted")

    async def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        self._answer("create", path)
        return obj

    async def patch(self, path: str, patch: Any, kind: str = "merge") -> dict[str, Any]:
        self._answer(f"patch-{kind}", path)
        return {}

    async def apply(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        self._answer("apply", path)
        return {**obj, "metadata": {**obj.get("metadata", {}), "generation": 3,
                                    "resourceVersion": "41"}}

    async def delete(self, path: str) -> bool:
        self._answer("delete", path)
        return True


def _event(reason: str) -> RecordEvent:
    return RecordEvent("shop", {"reason": reason})


async def _execute(api: RecordingApi, *actions: Any) -> tuple[Any, Memory, ControllerMetrics]:
    metrics = ControllerMetrics()
    summary, memory = await Executor(api, metrics).execute(Plan(tuple(actions)), Memory(), NOW)
    return summary, memory, metrics


@pytest.mark.asyncio
async def test_actions_run_in_order_and_follow_ups_only_after_success() -> None:
    api = RecordingApi(fail={"/w/failing": 500})
    summary, _, _ = await _execute(
        api,
        Patch("/w/ok", {}, Target.WORKLOAD, then=(_event("Changed"),)),
        Patch("/w/failing", {}, Target.WORKLOAD, then=(_event("Never"),)),
        Patch("/p/1", {}, Target.POD), Delete("/x"), WriteStatus("/s", {"a": 1}))
    assert api.calls == [("patch-merge", "/w/ok"), ("create", "/api/v1/namespaces/shop/events"),
                         ("patch-merge", "/w/failing"), ("patch-merge", "/p/1"),
                         ("delete", "/x"), ("patch-merge", "/s")]
    assert (summary.workloads_patched, summary.pods_patched) == (1, 1)
    assert summary.errors == ["patch /w/failing: HTTP 500 Failure: scripted"]


@pytest.mark.asyncio
async def test_tolerated_answers_are_no_errors() -> None:
    api = RecordingApi(fail={"/gone": 404, "/moved-on": 422, "/status": 404})
    summary, _, _ = await _execute(
        api, Patch("/gone", {}, Target.POD),
        Patch("/moved-on", [], Target.STALE_COPY, "json", frozenset({404, 422})),
        WriteStatus("/status", {}))
    assert summary.errors == []
    strict = await _execute(RecordingApi(fail={"/moved-on": 422}),
                            Patch("/moved-on", {}, Target.POD))
    assert strict[0].errors


EVICTION = "/api/v1/namespaces/shop/pods/web-a/eviction"
CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
# Each action type, the path it writes to and the answers it tolerates unless told otherwise.
TOLERATING: list[tuple[str, Callable[[], Action], str, frozenset[int]]] = [
    ("patch", lambda: Patch("/x", {}, Target.WORKLOAD), "/x", frozenset({404})),
    ("guarded-patch", lambda: Patch("/x", [], Target.STALE_COPY, "json",
                                    frozenset({404, 422})), "/x", frozenset({404, 422})),
    ("apply", lambda: Apply("/x", CM, "d"), "/x", frozenset()),
    ("create", lambda: Create("/x", CM), "/x", frozenset({409})),
    ("delete", lambda: Delete("/x"), "/x", frozenset({404})),
    ("evict", lambda: Evict("shop", "web-a", "uid-a", WORKLOAD), EVICTION,
     frozenset({404, 409})),
    ("status", lambda: WriteStatus("/x", {}), "/x", frozenset({404})),
]


@pytest.mark.parametrize(("make", "path", "defaults"),
                         [(m, p, d) for _, m, p, d in TOLERATING],
                         ids=[i for i, _, _, _ in TOLERATING])
@pytest.mark.asyncio
async def test_each_action_type_is_judged_by_what_it_says_it_tolerates(
        make: Callable[[], Action], path: str, defaults: frozenset[int]) -> None:
    action = make()
    assert not isinstance(action, RecordEvent) and action.tolerate == defaults
    for status in defaults:
        assert (await _execute(RecordingApi(fail={path: status}), action))[0].errors == []
    assert len((await _execute(RecordingApi(fail={path: 500}), action))[0].errors) == 1
    # The action's own set decides, not its type: emptied, what it tolerated is an error,
    # and an answer added to it is none.
    strict = dataclasses.replace(action, tolerate=frozenset())
    for status in defaults:
        assert len((await _execute(RecordingApi(fail={path: status}), strict))[0].errors) == 1
    lenient = dataclasses.replace(action, tolerate=frozenset({500}))
    assert (await _execute(RecordingApi(fail={path: 500}), lenient))[0].errors == []


@pytest.mark.asyncio
async def test_an_event_that_fails_with_any_answer_is_no_error_of_the_pass() -> None:
    for status in (403, 404, 409, 422, 500):
        api = RecordingApi(fail={"/api/v1/namespaces/shop/events": status})
        assert (await _execute(api, _event("Changed")))[0].errors == []


@pytest.mark.asyncio
async def test_an_eviction_remembers_its_pod_and_saves_state_after() -> None:
    api = RecordingApi()
    evict = Evict("shop", "web-a", "uid-a", WORKLOAD,
                  then=(Patch(WORKLOAD, {}, Target.STATE),))
    summary, memory, metrics = await _execute(api, evict)
    assert api.calls == [("create", "/api/v1/namespaces/shop/pods/web-a/eviction"),
                         ("patch-merge", WORKLOAD)]
    assert memory.awaiting(WORKLOAD, ["uid-a"], NOW)
    assert metrics.registry.get_sample_value("compactor_runtime_evictions_total",
                                             {"result": "evicted"}) == 1


@pytest.mark.asyncio
async def test_a_disruption_budget_saying_no_backs_the_workload_off() -> None:
    api = RecordingApi(fail={"/api/v1/namespaces/shop/pods/web-a/eviction": 429})
    evict = Evict("shop", "web-a", "uid-a", WORKLOAD, then=(Patch(WORKLOAD, {}, Target.STATE),))
    summary, memory, metrics = await _execute(api, evict)
    assert summary.errors == [] and len(api.calls) == 1  # no state saved
    assert memory.backing_off(WORKLOAD, NOW + datetime.timedelta(seconds=29))
    assert not memory.backing_off(WORKLOAD, NOW + datetime.timedelta(seconds=31))
    assert metrics.registry.get_sample_value("compactor_runtime_evictions_total",
                                             {"result": "pdb_blocked"}) == 1


@pytest.mark.asyncio
async def test_an_apply_records_what_it_applied_and_the_revision_it_made() -> None:
    api = RecordingApi()
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    _, memory, _ = await _execute(api, Apply("/cron", cron, "d1"), Apply("/cm", cm, "d2"))
    assert memory.applied == {"/cron": ("d1", "g3"), "/cm": ("d2", "r41")}


@pytest.mark.asyncio
async def test_an_event_that_cannot_be_recorded_is_no_error_of_the_pass() -> None:
    api = RecordingApi(fail={"/api/v1/namespaces/shop/events": 403})
    summary, _, _ = await _execute(api, Patch("/w", {}, Target.WORKLOAD,
                                              then=(_event("Changed"),)))
    assert summary.errors == [] and summary.workloads_patched == 1


class SlowApi(RecordingApi):
    """A patch takes a moment; counts how many are in flight at once."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = self.most = 0

    async def patch(self, path: str, patch: Any, kind: str = "merge") -> dict[str, Any]:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        await asyncio.sleep(0.001)
        self.in_flight -= 1
        return await super().patch(path, patch, kind)


@pytest.mark.asyncio
async def test_with_a_slow_stand_in_pod_patches_run_concurrently_but_bounded() -> None:
    api = SlowApi()
    pods = [Patch(f"/p/{i}", {}, Target.POD) for i in range(50)]
    summary, _ = await Executor(api, ControllerMetrics(), concurrency=4).execute(
        Plan((Patch("/w", {}, Target.WORKLOAD), *pods, Delete("/x"))), Memory(), NOW)
    assert api.most == 4 and summary.pods_patched == 50
    # A run of one target is bounded by what comes before and after it.
    assert api.calls[0] == ("patch-merge", "/w") and api.calls[-1] == ("delete", "/x")


def test_only_independent_patches_of_one_target_are_grouped() -> None:
    keyed = RecordEvent("shop", {}, key="once-an-hour")
    actions = [Patch("/w1", {}, Target.WORKLOAD, then=(_event("Changed"),)),
               Patch("/w2", {}, Target.WORKLOAD), Patch("/p1", {}, Target.POD),
               Patch("/p2", {}, Target.POD), Patch("/n", [], Target.NODE, "json"),
               Patch("/n2", [], Target.NODE, "json"), Patch("/p3", {}, Target.POD),
               Patch("/p4", {}, Target.POD, then=(keyed,))]
    assert [[a.path for a in b if isinstance(a, Patch)] for b in batches(actions)] == [
        ["/w1", "/w2"], ["/p1", "/p2"], ["/n"], ["/n2"], ["/p3"], ["/p4"]]


@pytest.mark.asyncio
async def test_pod_patches_past_the_budget_are_deferred_and_the_rest_still_runs() -> None:
    api = RecordingApi()
    ticks = iter(range(100))
    executor = Executor(api, ControllerMetrics(), concurrency=2,
                        clock=lambda: float(next(ticks)))
    pods = [Patch(f"/p/{i}", {}, Target.POD) for i in range(10)]
    summary, _ = await executor.execute(
        Plan((*pods, WriteStatus("/s", {}))), Memory(), NOW, deadline=3.0)
    assert summary.pods_patched + summary.deferred == 10 and summary.deferred > 0
    assert api.calls[-1] == ("patch-merge", "/s")  # what follows the Pods is never cut


@pytest.mark.asyncio
async def test_every_answer_to_a_write_is_observed() -> None:
    seen: list[str] = []
    executor = Executor(RecordingApi(), ControllerMetrics(),
                        observe=lambda o: seen.append(str(o.get("kind", "patched"))))
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    await executor.execute(Plan((Patch("/p", {}, Target.POD), Apply("/cm", cm, "d"),
                                 WriteStatus("/s", {}))), Memory(), NOW)
    assert seen == ["patched", "ConfigMap", "patched"]


EVENTS = "/api/v1/namespaces/default/events"
SAID_AGAIN = RecordEvent("default", {"kind": "Event", "count": 3,
                                     "lastTimestamp": "2026-12-01T12:00:00Z"}, repeats="n1.ab")


@pytest.mark.parametrize(("fail", "calls"), [
    pytest.param({}, [("patch-merge", f"{EVENTS}/n1.ab")], id="its-count-moves"),
    pytest.param({f"{EVENTS}/n1.ab": 404}, [("patch-merge", f"{EVENTS}/n1.ab"),
                                            ("create", EVENTS)], id="gone-so-made-anew"),
])
@pytest.mark.asyncio
async def test_an_event_said_again_moves_its_count_as_client_go_does(
        fail: dict[str, int], calls: list[tuple[str, str]]) -> None:
    """The API stand-in records the writes: a repeated Event is patched, not created."""
    api = RecordingApi(fail=fail)
    seen: list[object] = []
    summary, _ = await Executor(api, ControllerMetrics(), observe=seen.append).execute(
        Plan((SAID_AGAIN,)), Memory(), NOW)
    assert api.calls == calls and summary.errors == [] and len(seen) == 1
    assert SAID_AGAIN.again == {"count": 3, "lastTimestamp": "2026-12-01T12:00:00Z"}


@pytest.mark.asyncio
async def test_a_named_event_that_exists_already_counts_as_said() -> None:
    """A pass whose last write the caches had not shown yet: the create answers 409."""
    api = RecordingApi(fail={EVENTS: 409})
    keyed = RecordEvent("default", {"kind": "Event"}, key="k")
    summary, memory = await Executor(api, ControllerMetrics()).execute(
        Plan((keyed,)), Memory(), NOW)
    assert summary.errors == [] and memory.recently("k", NOW)
