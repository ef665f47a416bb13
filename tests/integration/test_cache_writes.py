"""The controller's watch caches and its own writes, on the real API server: with every watch
held back (the lag under test, the one stand-in here), a pass right after a write plans from
what that write left, never from the state before it; once the watches deliver, the caches
hold exactly what the API server holds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from compaction import names
from compaction.workload import WorkloadType
from controller.kubeapi.client import Api, Decode, Page
from controller.kubeapi.informer import Informers
from controller.process.reconciler import Reconciler
from controller.read.sources import sources
from controller.snapshot.workload import list_path
from localcluster import Cluster, Kube
from localcluster.cluster.kube import path
from tests.integration.conftest import Policies
from tests.integration.helpers import HARNESS_PLAN, deployment


class HeldWatches:
    """The real API; while ``open`` is clear, every watch event waits before it is delivered."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.open = asyncio.Event()
        self.open.set()

    def pages(self, path: str, label_selector: str | None = None,
              limit: int = 500, decode: Decode = orjson.loads) -> AsyncIterator[Page]:
        return self.api.pages(path, label_selector, limit, decode)

    async def watch(self, path: str, resource_version: str, timeout_seconds: int = 300,
                    label_selector: str | None = None) -> AsyncIterator[tuple[str, Any]]:
        async for event in self.api.watch(path, resource_version, timeout_seconds,
                                          label_selector):
            await self.open.wait()
            yield event


@pytest.mark.asyncio
async def test_with_watches_held_back_a_pass_never_plans_from_before_its_own_write(
        cluster: Cluster, kube: Kube, namespace: str,
        compaction_policies: Policies) -> None:
    kube.create(path("deployments", namespace), deployment("web", 0))
    policy = compaction_policies.make(namespace, {"workloadTypes": ["Deployment"]})
    api = await Api.connect(str(cluster.kubeconfig))
    held = HeldWatches(api)
    informers = Informers(held, sources("compactor-system"))
    stop = asyncio.Event()
    task = asyncio.create_task(informers.run(stop))
    try:
        assert await informers.wait_synced(informers.by_path, stop, 30)
        reconciler = Reconciler(api, HARNESS_PLAN, informers=informers)
        held.open.clear()  # from here on the caches learn only from the controller's writes
        first = await reconciler.reconcile()
        assert first.workloads_patched >= 1, first.errors
        again = await reconciler.reconcile()
        assert again.workloads_patched == 0 and again.errors == []
        cached = {w.view.name: w for w in informers.by_path[
            list_path(WorkloadType.DEPLOYMENT)].items() if w and w.view.namespace == namespace}
        assert cached["web"].labels[names.POLICY_LABEL] == policy

        # Someone else changes the workload while the watches lag: unseen until they deliver.
        kube.patch(path("deployments", namespace, "web"),
                   {"metadata": {"labels": {"team": "shop"}}})
        held.open.set()
        server = kube.get(path("deployments", namespace, "web"))

        def caught_up() -> bool:
            informer = informers.by_path[list_path(WorkloadType.DEPLOYMENT)]
            version = informer._objects.get((namespace, "web"), ("", None))[0]
            return bool(version == server["metadata"]["resourceVersion"])
        for _ in range(100):
            if caught_up():
                break
            await asyncio.sleep(0.1)
        assert caught_up()
        web = informers.by_path[list_path(WorkloadType.DEPLOYMENT)]._objects[
            (namespace, "web")][1]
        assert web.labels == server["metadata"]["labels"]
        assert web.annotations == server["metadata"]["annotations"]
    finally:
        stop.set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()
