"""The controller's probes: ready once its caches have synced, alive while its pass loop comes
round, leader or not.

They are served beside ``/metrics``, from threads of their own: a loop that hangs (an await
that never returns, a pass that never ends) cannot answer for itself, so ``/livez`` judges the
last time it came round, never whether the server still answers.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from threading import Thread
from typing import Any, Final
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

log = logging.getLogger("compactor.controller")

LIVE_PATH: Final = "/livez"
READY_PATH: Final = "/readyz"


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str


def liveness(now: float, last_round: float, bound: float) -> Verdict:
    """Alive unless the loop last came round more than ``bound`` seconds ago."""
    late = now - last_round
    if late > bound:
        return Verdict(False, f"the pass loop has not come round for {late:.0f} s "
                              f"(bound {bound:.0f} s)")
    return Verdict(True, f"the pass loop came round {late:.0f} s ago")


def readiness(unsynced: Iterable[str]) -> Verdict:
    """Ready once every cache has listed (or found its kind not served)."""
    waiting = sorted(unsynced)
    if waiting:
        return Verdict(False, f"{len(waiting)} caches not synced: {', '.join(waiting)}")
    return Verdict(True, "caches synced")


class Heartbeat:
    """When the pass loop last came round, in the clock's seconds (monotonic)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.last = clock()

    def beat(self) -> None:
        self.last = self.clock()


@dataclass(frozen=True)
class Probes:
    """What the two probes judge: the loop's heartbeat against its bound, and the caches
    not yet synced (asked from the probe's thread: a list of names, read without a lock)."""

    heartbeat: Heartbeat
    bound: float
    unsynced: Callable[[], Iterable[str]]

    def live(self) -> Verdict:
        return liveness(self.heartbeat.clock(), self.heartbeat.last, self.bound)

    def ready(self) -> Verdict:
        return readiness(self.unsynced())


WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def app(probes: Probes, metrics: WsgiApp) -> WsgiApp:
    """``/livez`` and ``/readyz`` (200 or 503, the reason as text), anything else to
    ``metrics``. A failed liveness is logged: after the restart, the previous container's
    log says why."""
    judges = {LIVE_PATH: probes.live, READY_PATH: probes.ready}

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
        where = str(environ.get("PATH_INFO") or "")
        judge = judges.get(where)
        if judge is None:
            yield from metrics(environ, start_response)
            return
        verdict = judge()
        if not verdict.ok and where == LIVE_PATH:
            log.warning("liveness probe failed: %s", verdict.reason)
        start_response("200 OK" if verdict.ok else "503 Service Unavailable",
                       [("Content-Type", "text/plain; charset=utf-8")])
        yield (verdict.reason + "\n").encode()
    return serve


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a request's thread never holds the process open


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        """The kubelet asks every few seconds: no line per request."""


def serve(port: int, address: str, registry: CollectorRegistry, probes: Probes) -> WSGIServer:
    """``/metrics``, ``/livez`` and ``/readyz`` on ``address:port``, in a daemon thread."""
    family = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM,
                                flags=socket.AI_PASSIVE)[0][0]

    class Server(_Server):
        address_family = family  # IPv6 too, as prometheus_client's server does

    server = make_server(address, port, app(probes, make_wsgi_app(registry)), Server,
                         handler_class=_Quiet)
    Thread(target=server.serve_forever, name="health", daemon=True).start()
    return server
