"""The blocked-plans counter of whole passes: ``Reconciler`` on a real ``Api`` whose HTTP
client is a stand-in serving fixed lists and answering every write (the boundary under test
is the pass: plan, metric, Event, and the memory that keeps one block from counting twice)."""

from __future__ import annotations

import datetime
from typing import Any, cast

import pytest
from kubernetes_asyncio.client import ApiClient

from controller.components.pod_settings import RuntimeSettings
from controller.kubeapi.client import Api
from controller.process.reconciler import Reconciler
from tests.unit.client_response import Response

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
EVENTS = "/api/v1/namespaces/shop/events"
BLOCKED = "compactor_resource_plans_blocked_total"


def _policy(cpu: str) -> dict[str, Any]:
    return {"apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterStaticPolicy",
            "metadata": {"name": "big", "uid": "s", "generation": 1, "resourceVersion": "1",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "app", "requests": {"cpu": cpu}}]}}


DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
    "namespace": "shop", "name": "web", "uid": "w", "resourceVersion": "1"},
    "spec": {"replicas": 1, "template": {"spec": {"containers": [
        {"name": "app", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}}]}}}}


class _Client:
    """kubernetes-asyncio's ``call_api``: a GET of ``lists`` answers its items (any other list
    is empty), a write answers its body; ``calls`` records (method, path)."""

    def __init__(self, lists: dict[str, list[dict[str, Any]]]) -> None:
        self.lists, self.calls = lists, list[tuple[str, str]]()

    async def call_api(self, path: str, method: str, *args: Any, body: Any = None,
                       **kwargs: Any) -> Response:
        self.calls.append((method, path))
        if method == "GET":
            return Response(200, {"items": self.lists.get(path, []),
                                  "metadata": {"resourceVersion": "1"}})
        return Response(200, body if isinstance(body, dict) else {})


def _blocked(reconciler: Reconciler, reason: str) -> float:
    value = reconciler.metrics.registry.get_sample_value(BLOCKED, {"reason": reason})
    assert value is not None  # every reason's series exists from the start
    return value


@pytest.mark.asyncio
async def test_a_newly_blocked_plan_is_counted_once_and_a_changed_block_again_stand_in_http(
) -> None:
    client = _Client({"/apis/compactor.dev/v1alpha1/clusterstaticpolicies": [_policy("4")],
                      "/apis/apps/v1/deployments": [DEPLOYMENT]})
    reconciler = Reconciler(Api(cast(ApiClient, client)), RuntimeSettings(),
                            clock=lambda: NOW)
    assert _blocked(reconciler, "request_above_limit") == 0

    await reconciler.reconcile()
    assert _blocked(reconciler, "request_above_limit") == 1
    assert client.calls.count(("POST", EVENTS)) == 1
    # The same block on the next pass: no second count, no second Event.
    await reconciler.reconcile()
    assert _blocked(reconciler, "request_above_limit") == 1
    assert client.calls.count(("POST", EVENTS)) == 1
    # Another value, another block: counted as new.
    client.lists["/apis/compactor.dev/v1alpha1/clusterstaticpolicies"] = [_policy("3")]
    await reconciler.reconcile()
    assert _blocked(reconciler, "request_above_limit") == 2
    assert _blocked(reconciler, "limit_range") == 0
    assert client.calls.count(("POST", EVENTS)) == 2
