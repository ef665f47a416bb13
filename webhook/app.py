"""The Starlette application: /mutate, /healthz, /readyz, /metrics."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import orjson
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from webhook.admission import Admitter
from webhook.errors import BodyTooLarge, RejectedRequest
from webhook.metrics import Metrics
from webhook.review import parse_review, response

log = logging.getLogger("compactor.webhook")


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"AdmissionReview larger than {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"AdmissionReview larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _error(status: int, message: str) -> Response:
    return Response(orjson.dumps({"error": message}), status, media_type="application/json")


def create_app(admitter: Admitter, metrics: Metrics,
               max_body_bytes: int = 3 * 1024 * 1024,
               ready: Callable[[], bool] = lambda: True,
               on_startup: Callable[[], Awaitable[None]] | None = None,
               on_shutdown: Callable[[], Awaitable[None]] | None = None) -> Starlette:
    async def mutate(request: Request) -> Response:
        start = time.perf_counter()
        try:
            review = parse_review(await _read_body(request, max_body_bytes))
        except ClientDisconnect:
            # The client went, or its connection was closed for sending too slowly: nobody
            # to answer, and nothing to log.
            return Response(status_code=400)
        except RejectedRequest as e:
            metrics.rejected.labels(e.reason).inc()
            metrics.requests.labels("rejected").inc()
            return _error(e.status, str(e))
        decision = await admitter.decide(review)
        out = Response(response(review["uid"], decision.patch), media_type="application/json")
        metrics.duration.observe(time.perf_counter() - start)
        return out

    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(_: Request) -> Response:
        return PlainTextResponse("ok") if ready() else PlainTextResponse("not ready", 503)

    async def metrics_endpoint(_: Request) -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if on_startup:
            await on_startup()
        try:
            yield
        finally:
            if on_shutdown:
                await on_shutdown()

    return Starlette(routes=[
        Route("/mutate", mutate, methods=["POST"]),
        Route("/healthz", healthz), Route("/readyz", readyz),
        Route("/metrics", metrics_endpoint),
    ], lifespan=lifespan)
