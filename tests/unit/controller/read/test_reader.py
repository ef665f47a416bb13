"""Reading a snapshot, with the API replaced by a recording stand-in (the boundary under
test is the reader: where each part comes from, and what it asks the API server)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from controller.kubeapi.client import ApiError, Decode, Page
from controller.kubeapi.informer import Informers
from controller.read.reader import JOBS, PODS, POLICIES, REPLICA_SETS, Reader
from controller.read.sources import sources

POLICY = {"apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
          "metadata": {"name": "p", "uid": "u", "generation": 1,
                       "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {}}
META = {"namespace": "shop", "name": "web-1", "uid": "u1", "resourceVersion": "3",
        "ownerReferences": [{"kind": "ReplicaSet", "name": "web", "controller": True}]}
POD = {"metadata": META, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}


class RecordingApi:
    def __init__(self) -> None:
        self.policies: list[dict[str, Any]] = []
        self.calls: list[tuple[str, str]] = []
        self.unserved = {"/apis/argoproj.io/v1alpha1/rollouts"}

    async def list(self, path: str, label_selector: str | None = None
                   ) -> tuple[list[dict[str, Any]], str]:
        self.calls.append(("list", path))
        if path in self.unserved:
            raise ApiError(404, "NotFound", "the server could not find the resource")
        if path == POLICIES[0]:
            return list(self.policies), "1"
        return ([POD] if path == PODS else []), "3"

    async def pages(self, path: str, label_selector: str | None = None, limit: int = 500,
                    decode: Decode = orjson.loads) -> AsyncIterator[Page]:
        yield await self.list(path, label_selector)

    async def version(self) -> str:
        self.calls.append(("version", ""))
        return "v1.36.3"

    def watch(self, path: str, resource_version: str, timeout_seconds: int = 300,
              label_selector: str | None = None) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        return self._quiet()

    async def _quiet(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        await asyncio.Event().wait()
        yield "", {}

    def listed(self, path: str) -> int:
        return self.calls.count(("list", path))


@pytest.mark.asyncio
async def test_pods_and_owners_come_from_synced_caches_and_equal_a_fresh_read() -> None:
    api = RecordingApi()
    fresh = await Reader(api).read()
    assert api.listed(PODS) == 1
    informers = Informers(api, sources("compactor-system"))
    stop = asyncio.Event()
    task = asyncio.create_task(informers.run(stop))
    while any(informers.synced(p) is None for p in (PODS, REPLICA_SETS, JOBS)):
        await asyncio.sleep(0.01)
    before = api.listed(PODS)
    cached = await Reader(api, informers=informers).read()
    assert api.listed(PODS) == before, "no list of Pods once the cache is synced"
    assert cached.pods == fresh.pods and cached.pods[0].owner == ("ReplicaSet", "web")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest.mark.asyncio
async def test_the_version_is_asked_once_and_only_while_a_policy_needs_the_scheduler() -> None:
    api = RecordingApi()
    reader = Reader(api)
    assert (await reader.read()).cluster_version == ""
    api.policies = [POLICY]
    assert (await reader.read()).cluster_version == "v1.36.3"
    await reader.read()
    assert api.calls.count(("version", "")) == 1


@pytest.mark.asyncio
async def test_an_unserved_kind_is_skipped_and_own_objects_are_listed_by_label() -> None:
    api = RecordingApi()
    snapshot = await Reader(api).read()
    assert snapshot.workloads == ()
    assert ("list", "/api/v1/namespaces/compactor-system/configmaps") in api.calls
    assert ("list", "/apis/batch/v1/namespaces/compactor-system/cronjobs") in api.calls
    assert ("list", "/apis/apps/v1/namespaces/compactor-system/deployments") in api.calls


@pytest.mark.asyncio
async def test_a_kind_its_cache_found_not_served_is_not_listed_by_every_pass() -> None:
    api = RecordingApi()
    informers = Informers(api, sources("compactor-system"))
    stop = asyncio.Event()
    task = asyncio.create_task(informers.run(stop))
    assert await informers.wait_synced(informers.by_path, stop, 5)
    rollouts = "/apis/argoproj.io/v1alpha1/rollouts"
    listed = api.listed(rollouts)
    reader = Reader(api, informers=informers)
    for _ in range(3):
        await reader.read()
    assert api.listed(rollouts) == listed
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


class ExpiringApi(RecordingApi):
    """Pods in two pages; the second page's continue token has expired ``expiries`` times."""

    def __init__(self, expiries: int) -> None:
        super().__init__()
        self.expiries = expiries

    async def pages(self, path: str, label_selector: str | None = None, limit: int = 500,
                    decode: Decode = orjson.loads) -> AsyncIterator[Page]:
        if path != PODS:
            yield await self.list(path, label_selector)
            return
        self.calls.append(("list", path))
        yield [POD], "3"
        if self.expiries:
            self.expiries -= 1
            raise ApiError(410, "Expired", "The provided continue parameter is too old")
        yield [{**POD, "metadata": {**META, "name": "web-2", "uid": "u2"}}], "3"


@pytest.mark.asyncio
async def test_a_list_whose_snapshot_expired_midway_is_listed_again_once_not_twice() -> None:
    api = ExpiringApi(expiries=1)
    snapshot = await Reader(api).read()
    assert [p.name for p in snapshot.pods] == ["web-1", "web-2"]  # nothing counted twice
    assert api.listed(PODS) == 2
    with pytest.raises(ApiError) as e:
        await Reader(ExpiringApi(expiries=2)).read()
    assert e.value.status == 410


class EventsApi(RecordingApi):
    """Answers the list of Events in ``default`` with one about a Node and one about a
    policy, and records the label selector it was asked with."""

    def __init__(self) -> None:
        super().__init__()
        self.selectors: dict[str, str | None] = {}

    async def list(self, path: str, label_selector: str | None = None
                   ) -> tuple[list[dict[str, Any]], str]:
        self.selectors[path] = label_selector
        if path != "/api/v1/namespaces/default/events":
            return await super().list(path, label_selector)
        about = [("Node", "n1"), ("ClusterCompactionPolicy", "p")]
        return [{"metadata": {"name": f"{name}.1", "resourceVersion": "5"},
                 "involvedObject": {"kind": kind, "name": name, "uid": "u"},
                 "reason": "NodeKept", "message": "m", "count": 2} for kind, name in about], "5"


@pytest.mark.asyncio
async def test_what_the_controller_told_on_nodes_is_read_back_by_its_own_label() -> None:
    api = EventsApi()
    snapshot = await Reader(api).read()
    assert api.selectors["/api/v1/namespaces/default/events"] == (
        "app.kubernetes.io/managed-by=compactor")
    assert [(e.node, e.reason, e.count, e.resource_version) for e in snapshot.node_events] == [
        ("n1", "NodeKept", 2, "5")]
