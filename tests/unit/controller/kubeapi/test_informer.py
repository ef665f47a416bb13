"""Informers with the API replaced by a scripted stand-in (the boundary under test): a 410
lists again, a dropped stream resumes from the last resourceVersion, events update the cache
and wake the reconciler, and reads fall back to the API until synced or with a selector."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from controller.kubeapi.client import ApiError, Decode, Page
from controller.kubeapi.informer import Informer, Informers, Source, drop_managed_fields
from controller.snapshot.pod import parse_pod


def pod(name: str, rv: str, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "shop", "name": name, "resourceVersion": rv,
                         "managedFields": [{"manager": "x"}], **extra}}


class ScriptedApi:
    def __init__(self, watches: list[Any]) -> None:
        self.watches = watches
        self.calls: list[tuple[str, str]] = []
        self.quiet = asyncio.Event()

    async def list(self, path: str, label_selector: str | None = None
                   ) -> tuple[list[Any], str]:
        self.calls.append(("list", label_selector or ""))
        return [pod("a", "5")], "5"

    async def pages(self, path: str, label_selector: str | None = None, limit: int = 500,
                    decode: Decode = orjson.loads) -> AsyncIterator[Page]:
        yield await self.list(path, label_selector)

    async def watch(self, path: str, resource_version: str, timeout_seconds: int = 300,
                    label_selector: str | None = None) -> AsyncIterator[tuple[str, Any]]:
        self.calls.append(("watch", resource_version))
        if not self.watches:
            self.quiet.set()
            await asyncio.Event().wait()
        step = self.watches.pop(0)
        if isinstance(step, Exception):
            raise step
        for event in step:
            yield event


async def _until_quiet(informer: Informer[Any], api: ScriptedApi) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(informer.run(stop))
    await asyncio.wait_for(api.quiet.wait(), 5)
    stop.set()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest.mark.asyncio
async def test_informer_with_a_scripted_api_follows_events_and_relists_after_410() -> None:
    wakes: list[int] = []
    api = ScriptedApi([
        [("ADDED", pod("b", "6")), ("BOOKMARK", {"metadata": {"resourceVersion": "7"}}),
         ("MODIFIED", pod("a", "8", labels={"x": "y"}))],
        ConnectionResetError("dropped"),
        [("DELETED", pod("b", "9"))],
        ApiError(410, "Expired", "too old"),
    ])
    informer = Informer(api, "/api/v1/pods", drop_managed_fields,
                        wake=lambda: wakes.append(1), error_retry=0)
    await _until_quiet(informer, api)
    assert api.calls == [("list", ""), ("watch", "5"), ("watch", "8"), ("watch", "8"),
                         ("watch", "9"), ("list", ""), ("watch", "5")]
    # The relist replaced the cache with what the server listed.
    assert [o["metadata"]["name"] for o in informer.items()] == ["a"]
    assert all("managedFields" not in o["metadata"] for o in informer.items())
    assert informer.synced and len(wakes) == 5  # two lists, three object events


@pytest.mark.asyncio
async def test_informer_with_a_scripted_api_serves_events_between_relists() -> None:
    api = ScriptedApi([[("ADDED", pod("b", "6")),
                        ("MODIFIED", pod("a", "7", labels={"x": "y"}))]])
    informer = Informer(api, "/api/v1/pods", drop_managed_fields)
    await _until_quiet(informer, api)
    by_name = {o["metadata"]["name"]: o for o in informer.items()}
    assert set(by_name) == {"a", "b"} and by_name["a"]["metadata"]["labels"] == {"x": "y"}
    assert informer.resource_version == "7"


@pytest.mark.asyncio
async def test_an_unserved_kind_is_not_synced_and_reads_fall_back_to_the_api() -> None:
    class Unserved(ScriptedApi):
        async def list(self, path: str, label_selector: str | None = None
                       ) -> tuple[list[Any], str]:
            self.calls.append(("list", label_selector or ""))
            if label_selector is None and len(self.calls) == 1:
                self.quiet.set()
                raise ApiError(404, "NotFound", "the server could not find the resource")
            return [pod("fresh", "1")], "1"

    api = Unserved([])
    rollouts = "/apis/argoproj.io/v1alpha1/rollouts"
    informers = Informers(api, {rollouts: Source(drop_managed_fields)})
    informer = informers.by_path[rollouts]
    await _until_quiet(informer, api)
    assert not informer.synced and informers.synced(rollouts) is None


@pytest.mark.asyncio
async def test_a_synced_cache_keeps_each_object_as_its_parse_makes_it() -> None:
    api = ScriptedApi([])
    informers = Informers(api, {"/api/v1/pods": Source(parse_pod, wakes=False)})
    await _until_quiet(informers.by_path["/api/v1/pods"], api)
    informer = informers.synced("/api/v1/pods")
    assert informer is not None and informer.resource_version == "5"
    (record,) = informer.items()
    assert record == parse_pod(pod("a", "5"))


@pytest.mark.asyncio
async def test_a_path_that_only_wakes_keeps_nothing_and_serves_nothing() -> None:
    api = ScriptedApi([[("ADDED", pod("b", "6"))]])
    wakes: list[int] = []
    informers = Informers(api, {"/api/v1/nodes": Source()}, wake=lambda: wakes.append(1))
    informer = informers.by_path["/api/v1/nodes"]
    await _until_quiet(informer, api)
    assert len(wakes) == 2 and len(informer) == 2 and informer.items() == [None, None]
    assert informers.objects() == 0
    assert informers.synced("/api/v1/nodes") is None  # it serves no reads


@pytest.mark.asyncio
async def test_with_a_scripted_api_a_lagging_watch_never_replaces_an_observed_write() -> None:
    # The controller's patch answered rv 9; the watch still delivers rv 6 and 8, then 9.
    api = ScriptedApi([[("MODIFIED", pod("a", "6", labels={"v": "old"})),
                        ("MODIFIED", pod("a", "8", labels={"v": "older"})),
                        ("MODIFIED", pod("a", "9", labels={"v": "mine"}))]])
    wakes: list[int] = []
    informers = Informers(api, {"/api/v1/pods": Source(drop_managed_fields)},
                          wake=lambda: wakes.append(1))
    informer = informers.by_path["/api/v1/pods"]
    await informer._list()
    informer.synced = True
    informers.observe({"kind": "Pod", **pod("a", "9", labels={"v": "mine"})})
    await _until_quiet(informer, api)
    (held,) = informer.items()
    assert held["metadata"]["labels"] == {"v": "mine"}
    assert wakes == [1]  # the relist in run(); no stale event and not our own echo


@pytest.mark.asyncio
async def test_a_relist_keeps_a_record_written_after_the_list_was_taken() -> None:
    api = ScriptedApi([])
    informer = Informer(api, "/api/v1/pods", drop_managed_fields)
    informer.put(pod("a", "12", labels={"v": "written"}))
    await informer._list()  # lists "a" at rv 5
    assert informer.items()[0]["metadata"]["labels"] == {"v": "written"}


def test_observe_goes_only_to_caches_whose_namespace_and_selector_hold_the_object() -> None:
    api = ScriptedApi([])
    own = "/api/v1/namespaces/compactor-system/configmaps"
    informers = Informers(api, {own: Source(drop_managed_fields,
                                            selector="app.kubernetes.io/managed-by=compactor")})
    informers.by_path[own].synced = True
    cm: dict[str, Any] = {"kind": "ConfigMap", "metadata": {
        "namespace": "compactor-system", "name": "x", "resourceVersion": "3",
        "labels": {"app.kubernetes.io/managed-by": "compactor"}}}
    informers.observe(cm)
    informers.observe({**cm, "metadata": {**cm["metadata"], "name": "other", "labels": {}}})
    informers.observe({**cm, "metadata": {**cm["metadata"], "namespace": "shop", "name": "y"}})
    assert [o["metadata"]["name"] for o in informers.by_path[own].items()] == ["x"]


def test_a_node_heartbeat_needs_no_pass() -> None:
    from controller.read.sources import NODES, sources
    from controller.snapshot.node import parse_node
    source = sources("compactor-system")[NODES]
    informer = Informer(ScriptedApi([]), NODES, parse_node, same=source.same)
    node = {"metadata": {"name": "n1", "resourceVersion": "5"},
            "status": {"allocatable": {"cpu": "4"}}}
    assert informer.put(node)
    assert not informer.put({**node, "metadata": {"name": "n1", "resourceVersion": "6"}})
    assert informer.put({**node, "metadata": {"name": "n1", "resourceVersion": "7",
                                              "labels": {"pool": "a"}}})


def test_watches_of_one_process_ask_for_different_lengths_between_once_and_twice() -> None:
    from controller.kubeapi.informer import WATCH_SECONDS, watch_seconds
    asked = {watch_seconds() for _ in range(200)}
    assert min(asked) >= WATCH_SECONDS and max(asked) < 2 * WATCH_SECONDS and len(asked) > 50
