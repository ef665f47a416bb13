"""The eviction the executor sends, through the controller's real ``Api`` over HTTP to a
loopback stand-in for the API server (the boundary mocked here is HTTP only;
tests/integration/test_eviction_precondition.py asks the real API server)."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import pytest_asyncio
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from controller.act.executor import Executor
from controller.act.metrics import ControllerMetrics
from controller.kubeapi.client import Api
from controller.plan.actions import Evict, Patch, Plan, Target
from controller.plan.between_passes import Memory

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
WORKLOAD = "/apis/apps/v1/namespaces/shop/statefulsets/db"
EVICTION = "/api/v1/namespaces/shop/pods/db-0/eviction"


class StandIn:
    """Records each request; answers an eviction with ``status`` (201 or an API error)."""

    def __init__(self) -> None:
        self.status = 201
        self.requests: list[tuple[str, str, Any]] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read() or b"null")
        self.requests.append((request.method, request.path, body))
        if request.method == "POST" and request.path == EVICTION and self.status != 201:
            return web.json_response({
                "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": self.status,
                "reason": "Conflict", "message": "Precondition failed: UID in precondition: "
                "uid-old, UID in object meta: uid-new"}, status=self.status)
        return web.json_response(body if isinstance(body, dict) else {}, status=201)


@pytest_asyncio.fixture
async def stand_in() -> AsyncIterator[StandIn]:
    server = StandIn()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield server
    await runner.cleanup()


async def _evict(url: str) -> tuple[Any, Memory, ControllerMetrics]:
    api = Api(ApiClient(Configuration(host=url)))
    metrics = ControllerMetrics()
    evict = Evict("shop", "db-0", "uid-old", WORKLOAD,
                  then=(Patch(WORKLOAD, {"metadata": {}}, Target.STATE),))
    try:
        summary, memory = await Executor(api, metrics).execute(Plan((evict,)), Memory(), NOW)
    finally:
        await api.close()
    return summary, memory, metrics


@pytest.mark.asyncio
async def test_an_eviction_sent_over_mocked_http_carries_the_pod_uid_precondition(
        stand_in: StandIn) -> None:
    summary, memory, metrics = await _evict(stand_in.url)
    assert summary.errors == []
    assert metrics.registry.get_sample_value("compactor_runtime_evictions_total",
                                             {"result": "evicted"}) == 1
    method, url, body = stand_in.requests[0]
    assert (method, url) == ("POST", EVICTION)
    assert body == {"apiVersion": "policy/v1", "kind": "Eviction",
                    "metadata": {"name": "db-0", "namespace": "shop"},
                    "deleteOptions": {"preconditions": {"uid": "uid-old"}}}
    assert [(m, u) for m, u, _ in stand_in.requests[1:]] == [("PATCH", WORKLOAD)]
    assert memory.awaiting(WORKLOAD, ["uid-old"], NOW)


@pytest.mark.asyncio
async def test_a_409_over_mocked_http_means_the_pod_is_gone_not_an_error(
        stand_in: StandIn) -> None:
    stand_in.status = 409  # the uid precondition failed: a new Pod has the old one's name
    summary, memory, metrics = await _evict(stand_in.url)
    assert summary.errors == []
    assert [(m, u) for m, u, _ in stand_in.requests] == [("POST", EVICTION)]  # no follow-up
    assert not memory.awaiting(WORKLOAD, ["uid-old"], NOW)
    assert not memory.backing_off(WORKLOAD, NOW)
    assert metrics.registry.get_sample_value("compactor_runtime_evictions_total",
                                             {"result": "evicted"}) == 0
