"""``compactor-extender``'s app in-process, its watch fed by a scripted source (the boundary
under test here; tests/integration/test_scheduler_extender.py runs the process beside the real
kube-scheduler)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import orjson
import pytest

from webhook.drain_marks import DrainMarks
from webhook.extender_server import ExtenderSettings, create_app
from webhook.metrics import ExtenderMetrics

OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "u1",
         "controller": True}


class OneEvent:
    """A fake API server: the list holds a marked Pod, the watch then says it terminates."""

    def __init__(self) -> None:
        self.watched = asyncio.Event()

    async def list_metadata(self, path: str, page: int = 500
                            ) -> tuple[list[dict[str, Any]], str]:
        return [{"metadata": {"uid": "old", "namespace": "shop", "ownerReferences": [OWNER],
                              "annotations": {"compactor.dev/planned-node": "dense"}}}], "1"

    async def watch_metadata(self, path: str, resource_version: str,
                             opened: Callable[[], None] = lambda: None
                             ) -> AsyncIterator[dict[str, Any]]:
        opened()
        yield {"type": "MODIFIED", "object": {"metadata": {
            "uid": "old", "namespace": "shop", "ownerReferences": [OWNER],
            "resourceVersion": "2", "deletionTimestamp": "2026-12-07T00:00:00Z",
            "annotations": {"compactor.dev/planned-node": "dense"}}}}
        self.watched.set()
        await asyncio.Event().wait()


@pytest.mark.asyncio
async def test_prioritize_scores_the_planned_node_of_a_replacement_and_counts_it() -> None:
    source, metrics = OneEvent(), ExtenderMetrics()
    app = create_app(DrainMarks(), metrics, reader=source)
    async with app.router.lifespan_context(app):
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                   base_url="http://extender")
        await asyncio.wait_for(source.watched.wait(), 5)
        args = {"Pod": {"metadata": {"uid": "new", "namespace": "shop",
                                     "ownerReferences": [OWNER]}},
                "NodeNames": ["sparse", "dense"]}
        resp = await client.post("/prioritize", content=orjson.dumps(args))
        assert resp.status_code == 200
        assert resp.json() == [{"Host": "sparse", "Score": 0}, {"Host": "dense", "Score": 10}]
        resp = await client.post("/prioritize", content=b"{}")
        assert resp.status_code == 400
        assert (await client.get("/prioritize")).status_code == 405
        assert (await client.get("/healthz")).text == "ok"
        text = (await client.get("/metrics")).text
    for line in ('compactor_extender_requests_total{outcome="planned"} 1.0',
                 'compactor_extender_requests_total{outcome="malformed_args"} 1.0',
                 'compactor_owner_watch_synced{kind="Pod"} 1.0'):
        assert line in text, text


@pytest.mark.parametrize(("env", "expected"), [
    ({}, ExtenderSettings()),
    ({"COMPACTOR_EXTENDER_PORT": "9000", "COMPACTOR_EXTENDER_KUBECONFIG": "/k",
      "COMPACTOR_EXTENDER_LOG_LEVEL": "DEBUG"},
     ExtenderSettings(port=9000, kubeconfig="/k", log_level="debug")),
])
def test_settings_from_the_environment(env: dict[str, str], expected: ExtenderSettings) -> None:
    assert ExtenderSettings.from_env(env) == expected


@pytest.mark.parametrize("port", ["0", "65536", "http", "-1"])
def test_a_bad_port_is_refused_with_the_variable_named(port: str) -> None:
    with pytest.raises(ValueError, match="COMPACTOR_EXTENDER_PORT"):
        ExtenderSettings.from_env({"COMPACTOR_EXTENDER_PORT": port})
