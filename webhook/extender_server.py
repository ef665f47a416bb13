"""The compaction scheduler's extender as a process of its own (``compactor-extender``): a
container beside kube-scheduler in the scheduler's Pod, plain HTTP on the Pod's loopback.

Beside the scheduler it needs no Service, certificate or NetworkPolicy rule (nothing outside the
Pod can reach it), and it reads the Pods a drain marks with the scheduler's own ServiceAccount,
which lists and watches Pods already: the admission webhook, which must never read a Pod,
keeps its account. ``POST /prioritize``, ``/healthz`` and ``/metrics``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import orjson
import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from webhook.app import read_body, send_body
from webhook.drain_marks import DrainMarks
from webhook.errors import RejectedRequest
from webhook.extender import prioritize
from webhook.feed import OwnerFeed
from webhook.kubeapi import KubeReader
from webhook.metrics import ExtenderMetrics

log = logging.getLogger("compactor.extender")
PORT = 10262  # kube-scheduler's secure port is 10259; the descheduler's, 10258


@dataclass(frozen=True)
class ExtenderSettings:
    host: str = "127.0.0.1"
    port: int = PORT
    kubeconfig: str | None = None
    log_level: str = "info"
    lookup_timeout_seconds: float = 1.5
    max_body_bytes: int = 3 * 1024 * 1024

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> ExtenderSettings:
        p = "COMPACTOR_EXTENDER_"
        port = env.get(p + "PORT", str(PORT))
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{p}PORT must be a port number, not {port!r}")
        return cls(host=env.get(p + "HOST", cls.host), port=int(port),
                   kubeconfig=env.get(p + "KUBECONFIG") or None,
                   log_level=env.get(p + "LOG_LEVEL", cls.log_level).lower())


class Prioritize:
    """/prioritize, once per Pod the scheduler scores (when more than one node is feasible)."""

    def __init__(self, marks: DrainMarks, metrics: ExtenderMetrics, max_body_bytes: int
                 ) -> None:
        self.marks, self.metrics, self.max_body_bytes = marks, metrics, max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            body = await read_body(scope, receive, self.max_body_bytes)
            if body is None:
                await send_body(send, 400, b"", content_type=False)
                return
            out, outcome = prioritize(body, self.marks)
        except RejectedRequest as e:
            self.metrics.extender.labels(e.reason).inc()
            await send_body(send, e.status, orjson.dumps({"error": str(e)}))
            return
        self.metrics.extender.labels(outcome).inc()
        await send_body(send, 200, out)


def create_app(marks: DrainMarks, metrics: ExtenderMetrics, reader: Any = None,
               settings: ExtenderSettings = ExtenderSettings()) -> Starlette:
    """The app; with a ``reader`` (or the settings' credentials), it follows the marked Pods
    while it runs."""

    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok")

    async def metrics_endpoint(_: Request) -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        source = reader or await KubeReader.from_environment(
            settings.kubeconfig, settings.lookup_timeout_seconds)
        feed = OwnerFeed(source, metrics, sources=(), limit_range_source=None, marks=marks)
        task = asyncio.create_task(feed.run())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if reader is None:
                await source.close()

    return Starlette(routes=[
        Route("/prioritize", Prioritize(marks, metrics, settings.max_body_bytes),
              methods=["POST"]),
        Route("/healthz", healthz), Route("/metrics", metrics_endpoint),
    ], lifespan=lifespan)


def main() -> None:
    settings = ExtenderSettings.from_env()
    logging.basicConfig(level=settings.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    app = create_app(DrainMarks(), ExtenderMetrics(), settings=settings)
    uvicorn.run(app, host=settings.host, port=settings.port, access_log=False,
                log_level=settings.log_level, lifespan="on", proxy_headers=False,
                server_header=False, date_header=False, timeout_graceful_shutdown=5)


if __name__ == "__main__":
    main()
