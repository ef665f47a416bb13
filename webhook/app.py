"""The Starlette application: /mutate, /healthz, /readyz, /metrics."""

from __future__ import annotations

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
from starlette.types import ASGIApp, Receive, Scope, Send

from webhook.admission import Admitter
from webhook.errors import BodyTooLarge, RejectedRequest
from webhook.metrics import Metrics
from webhook.review import parse_review, response

log = logging.getLogger("compactor.webhook")


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes | None:
    """The whole body; None when the client went before sending it."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            declared = value.decode("latin-1")
            if declared.isdigit() and int(declared) > limit:
                raise BodyTooLarge(f"body larger than {limit} bytes")
            break
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            if chunk:
                size += len(chunk)
                if size > limit:
                    raise BodyTooLarge(f"body larger than {limit} bytes")
                chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
        elif message["type"] == "http.disconnect":
            return None


async def send_body(send: Send, status: int, body: bytes, content_type: bool = True) -> None:
    """What ``starlette.responses.Response(body, status, media_type="application/json")``
    sends (without a media type when ``content_type`` is false), with none of its objects."""
    headers = [(b"content-length", str(len(body)).encode("latin-1"))]
    if content_type:
        headers.append((b"content-type", b"application/json"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Mutate:
    """/mutate as a bare ASGI app: it reads one body and sends one answer, which is all of
    Starlette's Request and Response that it used, and they cost more than the rest of a
    warm admission's framework overhead. (Starlette routes an object that is no function
    as ASGI; its method check and error middleware still apply.)"""

    def __init__(self, admitter: Admitter, metrics: Metrics, max_body_bytes: int) -> None:
        self.admitter, self.metrics, self.max_body_bytes = admitter, metrics, max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = time.perf_counter()
        metrics = self.metrics
        try:
            body = await read_body(scope, receive, self.max_body_bytes)
            if body is None:
                # The client went, or its connection was closed for sending too slowly:
                # nobody to answer, and nothing to log.
                await send_body(send, 400, b"", content_type=False)
                return
            review = parse_review(body)
        except RejectedRequest as e:
            metrics.rejected.labels(e.reason).inc()
            metrics.requests.labels("rejected").inc()
            await send_body(send, e.status, orjson.dumps({"error": str(e)}))
            return
        decision = await self.admitter.decide(review)
        out = response(review["uid"], decision.patch)
        metrics.duration.observe(time.perf_counter() - start)
        await send_body(send, 200, out)


class MutateFirst:
    """The ASGI app the server runs: ``POST /mutate`` goes straight to its endpoint, past
    Starlette's middleware and router (ExceptionMiddleware only answers HTTPExceptions,
    which the endpoint never raises): the warm admission is all of the webhook's load. A
    crash in it is still a 500 (the server answers one for an app that raised before its
    response began); every other request, lifespan included, goes to the Starlette app."""

    def __init__(self, app: ASGIApp, mutate: ASGIApp) -> None:
        self.app, self.mutate = app, mutate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and \
                scope["path"] == "/mutate" and not scope.get("root_path"):
            await self.mutate(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def create_app(admitter: Admitter, metrics: Metrics,
               max_body_bytes: int = 3 * 1024 * 1024,
               ready: Callable[[], bool] = lambda: True,
               on_startup: Callable[[], Awaitable[None]] | None = None,
               on_shutdown: Callable[[], Awaitable[None]] | None = None) -> MutateFirst:
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

    mutate = Mutate(admitter, metrics, max_body_bytes)
    return MutateFirst(Starlette(routes=[
        Route("/mutate", mutate, methods=["POST"]),
        Route("/healthz", healthz), Route("/readyz", readyz),
        Route("/metrics", metrics_endpoint),
    ], lifespan=lifespan), mutate)
