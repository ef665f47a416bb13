"""The executor's eviction on the real API server: it names the Pod by uid, so it never hits
a new Pod that took the old one's name (as a StatefulSet's replacement does)."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from controller.act.executor import Executor
from controller.act.metrics import ControllerMetrics
from controller.kubeapi.client import Api
from controller.plan.actions import Evict, Plan
from controller.plan.between_passes import Memory
from localcluster import Cluster, Kube
from localcluster.cluster.kube import path, wait_for
from tests.integration.helpers import PAUSE, gone

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)


@pytest_asyncio.fixture
async def api(cluster: Cluster) -> AsyncIterator[Api]:
    client = await Api.connect(str(cluster.kubeconfig))
    yield client
    await client.close()


def _pod(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    """An unscheduled Pod: the API server deletes it at once, without a grace period."""
    return kube.create(path("pods", namespace), {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": PAUSE}]}})


async def _evict(api: Api, namespace: str, name: str, uid: str
                 ) -> tuple[list[str], ControllerMetrics]:
    metrics = ControllerMetrics()
    evict = Evict(namespace, name, uid, path("statefulsets", namespace, "db"))
    summary, _ = await Executor(api, metrics).execute(Plan((evict,)), Memory(), NOW)
    return summary.errors, metrics


@pytest.mark.asyncio
async def test_an_eviction_with_a_stale_uid_precondition_leaves_the_new_pod_of_that_name(
        kube: Kube, namespace: str, api: Api) -> None:
    old = _pod(kube, namespace, "db-0")["metadata"]["uid"]
    kube.delete(path("pods", namespace, "db-0"))
    wait_for("db-0 gone", lambda: gone(kube, path("pods", namespace, "db-0")))
    new = _pod(kube, namespace, "db-0")["metadata"]["uid"]
    assert new != old

    errors, metrics = await _evict(api, namespace, "db-0", old)
    assert errors == [], "a failed precondition means the Pod aimed at is gone"
    pod = kube.get(path("pods", namespace, "db-0"))
    assert pod["metadata"]["uid"] == new and not pod["metadata"].get("deletionTimestamp")
    assert metrics.registry.get_sample_value("compactor_runtime_evictions_total",
                                             {"result": "evicted"}) == 0

    # The same eviction aimed at the Pod's own uid goes through.
    errors, metrics = await _evict(api, namespace, "db-0", new)
    assert errors == []
    assert metrics.registry.get_sample_value("compactor_runtime_evictions_total",
                                             {"result": "evicted"}) == 1
    wait_for("db-0 evicted", lambda: gone(kube, path("pods", namespace, "db-0")))
