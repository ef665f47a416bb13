"""Hostile clients against the webhook's TLS port, and normal admissions meanwhile.

Slowloris connections send a request head one byte at a time; non-readers pipeline requests
over a tiny receive window and never read. Meanwhile normal AdmissionReviews, each on a new
connection (as the API server opens one whenever its idle ones are busy), are timed from
the client. What this shows: the server closes the slow connections on its own deadlines,
and the normal calls are answered as fast as without them.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

_HEAD = (b"POST /mutate HTTP/1.1\r\nHost: compactor-webhook\r\n"
         b"Content-Type: application/json\r\nContent-Length: 2\r\n"
         + b"".join(b"X-Pad-%d: %s\r\n" % (i, b"x" * 40) for i in range(40)) + b"\r\n{}")


def client_context() -> ssl.SSLContext:
    """Any certificate will do: these clients are about load, not trust."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


@dataclass(frozen=True)
class Timings:
    count: int
    failures: int
    p50_ms: float
    p99_ms: float
    max_ms: float


def timings(latencies: list[float], failures: int) -> Timings:
    ordered = sorted(latencies)

    def pick(q: float) -> float:
        if not ordered:
            return float("nan")
        return 1000 * ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]
    return Timings(len(latencies) + failures, failures, pick(0.5), pick(0.99),
                   1000 * ordered[-1] if ordered else float("nan"))


@dataclass(frozen=True)
class Hostility:
    slowloris: int
    nonreaders: int
    # Seconds each connection stayed open after its first byte, until the server closed it;
    # inf for a connection the server never closed within the run.
    slowloris_open: tuple[float, ...]
    nonreaders_open: tuple[float, ...]
    slowloris_connected: int  # of them, finished the TLS handshake


async def _slow_one(host: str, port: int, tls: ssl.SSLContext, byte_interval: float,
                    give_up: float, connected: list[int]) -> float:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            host, port, ssl=tls, server_hostname="compactor-webhook"), 30)
    except (TimeoutError, OSError):
        return math.inf
    connected.append(1)
    started = time.monotonic()
    closed = asyncio.ensure_future(reader.read(1))
    try:
        for byte in _HEAD:
            if closed.done() or time.monotonic() - started > give_up:
                break
            writer.write(bytes([byte]))
            try:
                await writer.drain()
            except OSError:
                break
            await asyncio.wait([closed], timeout=byte_interval)
        if not closed.done():
            await asyncio.wait([closed], timeout=max(0.0, give_up - (time.monotonic() -
                                                                      started)))
        return time.monotonic() - started if closed.done() else math.inf
    finally:
        closed.cancel()
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


async def _nonreader_one(host: str, port: int, tls: ssl.SSLContext, requests: int,
                         give_up: float) -> float:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    try:
        await loop.sock_connect(sock, (host, port))
        _, writer = await asyncio.wait_for(asyncio.open_connection(
            sock=sock, ssl=tls, server_hostname="compactor-webhook"), 30)
    except (TimeoutError, OSError):
        sock.close()
        return math.inf
    started = time.monotonic()
    request = b"GET /metrics HTTP/1.1\r\nHost: compactor-webhook\r\n\r\n"
    try:
        writer.write(request * requests)
        # Never read. Probe with a byte now and then: once the server has closed the
        # connection, a write fails.
        while time.monotonic() - started < give_up:
            await asyncio.sleep(0.25)
            writer.write(b"\r\n")
            try:
                await asyncio.wait_for(writer.drain(), 0.25)
            except TimeoutError:
                continue
            except OSError:
                return time.monotonic() - started
            if writer.transport.is_closing():
                return time.monotonic() - started
        return math.inf
    finally:
        writer.transport.abort()


async def _hostility(host: str, port: int, slowloris: int, nonreaders: int,
                     byte_interval: float, give_up: float, ready: threading.Event
                     ) -> Hostility:
    tls = client_context()
    connected: list[int] = []
    slow = [asyncio.ensure_future(_slow_one(host, port, tls, byte_interval, give_up, connected))
            for _ in range(slowloris)]
    deaf = [asyncio.ensure_future(_nonreader_one(host, port, tls, 200, give_up))
            for _ in range(nonreaders)]
    deadline = time.monotonic() + 30
    while len(connected) < slowloris and time.monotonic() < deadline and not all(
            t.done() for t in slow):
        await asyncio.sleep(0.05)
    ready.set()
    slow_open = await asyncio.gather(*slow)
    deaf_open = await asyncio.gather(*deaf)
    return Hostility(slowloris, nonreaders, tuple(slow_open), tuple(deaf_open),
                     len(connected))


class HostileLoad:
    """The hostile clients on a thread of their own, so that the timed admissions share no
    event loop with them."""

    def __init__(self, host: str, port: int, slowloris: int = 200, nonreaders: int = 20,
                 byte_interval: float = 0.5, give_up: float = 30.0) -> None:
        self._args = (host, port, slowloris, nonreaders, byte_interval, give_up)
        self.ready = threading.Event()
        self.result: Hostility | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.result = asyncio.run(_hostility(*self._args, self.ready))

    def __enter__(self) -> HostileLoad:
        self._thread.start()
        if not self.ready.wait(60):
            raise TimeoutError("the hostile clients never connected")
        return self

    def __exit__(self, *exc: object) -> None:
        self._thread.join(self._args[-1] + 30)

    def outcome(self) -> Hostility:
        if self.result is None:
            raise RuntimeError("the hostile clients have not finished")
        return self.result


def admissions(url: str, body: Callable[[], bytes], count: int, interval: float,
               tls: ssl.SSLContext | None = None) -> Timings:
    """``count`` AdmissionReviews, one every ``interval`` s, each on a new TLS connection;
    a failure is any answer but 200 (a 503 from a full server included) or no answer within
    the API server's 3 s."""
    latencies: list[float] = []
    failures = 0
    limits = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(verify=tls or client_context(), limits=limits, timeout=3.0) as client:
        for _ in range(count):
            started = time.monotonic()
            try:
                ok = client.post(url, content=body()).status_code == 200
            except httpx.HTTPError:
                ok = False
            if ok:
                latencies.append(time.monotonic() - started)
            else:
                failures += 1
            time.sleep(max(0.0, interval - (time.monotonic() - started)))
    return timings(latencies, failures)
