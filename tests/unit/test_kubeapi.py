"""The webhook's API reader over real HTTP, against a loopback stand-in for the API server
(the boundary under test is how the reader judges answers; the integration suite reads from
the real API server)."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
from aiohttp import web

from tests.unit.webhook_fakes import RS, pod, review
from webhook.credentials import Credentials
from webhook.kubeapi import KubeReader
from webhook.server import Webhook
from webhook.settings import Settings

NAMESPACE = {"metadata": {"name": "shop", "labels": {}}}


@pytest_asyncio.fixture
async def stand_in() -> AsyncIterator[str]:
    """Namespaces answer as JSON; the ReplicaSet answers 200 with a body that is not JSON."""

    async def namespace(_: web.Request) -> web.Response:
        return web.json_response(NAMESPACE)

    async def garbage(_: web.Request) -> web.Response:
        return web.Response(text="<html>proxy error page</html>", status=200)

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/shop", namespace)
    app.router.add_get("/apis/apps/v1/namespaces/shop/replicasets/web-abc", garbage)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


@pytest.mark.asyncio
async def test_a_200_that_is_not_json_counts_as_an_api_error(stand_in: str) -> None:
    reader = KubeReader(Credentials(stand_in, ssl.create_default_context()), timeout=2)
    webhook = Webhook(Settings(watch_owners=False), reader=reader)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=webhook.app),
                                 base_url="http://webhook") as client:
        resp = await client.post("/mutate", content=review(pod(owner=RS)))
    await reader.close()
    assert resp.status_code == 200 and "patch" not in resp.json()["response"]
    registry = webhook.metrics.registry
    assert registry.get_sample_value("compactor_admission_failed_open_total",
                                     {"reason": "api_error"}) == 1
    assert registry.get_sample_value("compactor_admission_failed_open_total",
                                     {"reason": "internal"}) is None
    assert registry.get_sample_value("compactor_owner_lookups_total", {"result": "error"}) == 1
