"""The Starlette application: /mutate, /healthz, /readyz, /metrics."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import orjson
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from webhook.admission import Admitter, Decision, Outcome
from webhook.metrics import Metrics
from webhook.owners import LookupFailed, UnusableIntent
from webhook.review import MalformedReview, parse_review, response

log = logging.getLogger("compactor.webhook")


class BodyTooLarge(Exception):
    pass


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _error(status: int, message: str) -> Response:
    return Response(orjson.dumps({"error": message}), status, media_type="application/json")


def create_app(admitter: Admitter, metrics: Metrics, budget_seconds: float = 2.0,
               max_body_bytes: int = 3 * 1024 * 1024,
               ready: Callable[[], bool] = lambda: True,
               on_startup: Callable[[], Awaitable[None]] | None = None,
               on_shutdown: Callable[[], Awaitable[None]] | None = None) -> Starlette:
    async def mutate(request: Request) -> Response:
        start = time.perf_counter()
        try:
            body = await _read_body(request, max_body_bytes)
        except BodyTooLarge:
            return _error(413, f"AdmissionReview larger than {max_body_bytes} bytes")
        try:
            review = parse_review(body)
        except MalformedReview as e:
            return _error(400, str(e))
        try:
            async with asyncio.timeout(budget_seconds):
                decision = await admitter.decide(review)
        except TimeoutError:
            decision = Decision(Outcome.FAILED_OPEN, reason="timeout")
        except LookupFailed as e:
            log.warning("owner lookup failed, admitting unchanged: %s", e)
            decision = Decision(Outcome.FAILED_OPEN, reason="api_error")
        except UnusableIntent as e:
            log.warning("unusable intent, admitting unchanged: %s", e)
            decision = Decision(Outcome.FAILED_OPEN, reason="unknown_intent")
        except MalformedReview as e:
            decision = Decision(Outcome.FAILED_OPEN, reason="malformed_object")
            log.warning("malformed object in review %s: %s", review["uid"], e)
        except Exception:
            log.exception("internal error, admitting unchanged")
            decision = Decision(Outcome.FAILED_OPEN, reason="internal")
        if decision.outcome is Outcome.FAILED_OPEN:
            metrics.failures.labels(decision.reason).inc()
        metrics.requests.labels(decision.outcome.value).inc()
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
