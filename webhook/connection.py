"""The webhook's connections: deadlines on what a client sends and on what it reads.

uvicorn closes an idle keep-alive connection, but it gives a client that has begun a request
all the time it wants to finish it, and a response the client never reads holds its task
forever. The API server sends a whole request at once and reads its answer at once, so
anything slower is a broken or hostile client; these deadlines close it before it can hold
one of the server's limited connections for long:

- the TLS handshake must finish within ``tls_handshake_timeout`` (asyncio's default is 60 s);
- a request, from its first byte (or from the connection's start), must arrive whole within
  ``read_timeout``;
- a response the client stopped reading must drain within ``write_timeout``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("compactor.webhook")


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a read and a write deadline (class attributes, set by
    ``guarded_protocol``).

    A request only notes when it began: one timer per connection checks the request then
    arriving, re-arming itself for a request that began after it was set. Steady traffic
    costs a connection one timer per ``read_timeout`` instead of one per request, and every
    request still gets exactly ``read_timeout`` from its first byte."""

    read_timeout: float = 5.0
    write_timeout: float = 5.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_started: float | None = None  # loop time; None while no request is partly in
        self._read_timer: asyncio.TimerHandle | None = None
        self._write_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_read()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        # Between requests the connection is idle (uvicorn's keep-alive timer governs it);
        # the first byte of the next request starts that request's deadline.
        if self._read_started is None and self.conn.their_state is h11.IDLE:
            self._start_read()
        super().data_received(data)
        state = self.conn.their_state
        if state is not h11.IDLE and state is not h11.SEND_BODY:
            self._read_started = None  # the whole request is in

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._read_started = None

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_deadline is None:
            self._write_deadline = self.loop.call_later(
                self.write_timeout, self._expire, "did not read its response")

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def _start_read(self) -> None:
        self._read_started = now = self.loop.time()
        if self._read_timer is None:
            self._read_timer = self.loop.call_at(now + self.read_timeout, self._check_read)

    def _check_read(self) -> None:
        assert self._read_timer is not None
        armed_for, self._read_timer = self._read_timer.when(), None
        if self._read_started is None:
            return  # no request is partly in: the next one's first byte arms a timer again
        deadline = self._read_started + self.read_timeout
        if deadline <= armed_for:
            self._expire("did not send a whole request")
        else:  # a request that began after this timer was set
            self._read_timer = self.loop.call_at(deadline, self._check_read)

    def _disarm(self) -> None:
        self._read_started = None
        for timer in (self._read_timer, self._write_deadline):
            if timer is not None:
                timer.cancel()
        self._read_timer = self._write_deadline = None

    def _expire(self, what: str) -> None:
        self._disarm()
        if self.transport is not None and not self.transport.is_closing():
            log.debug("closing a connection from %s: it %s in time", self.client, what)
            self.transport.abort()


def guarded_protocol(read_timeout: float, write_timeout: float) -> type[GuardedH11Protocol]:
    """The protocol class uvicorn instantiates per connection, with these deadlines."""
    return type("WebhookH11Protocol", (GuardedH11Protocol,),
                {"read_timeout": read_timeout, "write_timeout": write_timeout})


class _HandshakeBoundLoop(asyncio.SelectorEventLoop):
    """An event loop whose TLS servers bound the handshake (uvicorn passes no timeout)."""

    tls_handshake_timeout: float = 5.0

    async def create_server(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("ssl") is not None:
            kwargs.setdefault("ssl_handshake_timeout", self.tls_handshake_timeout)
        return await super().create_server(*args, **kwargs)


def loop_factory(tls_handshake_timeout: float) -> Callable[[], asyncio.AbstractEventLoop]:
    def make() -> asyncio.AbstractEventLoop:
        loop = _HandshakeBoundLoop()
        loop.tls_handshake_timeout = tls_handshake_timeout
        return loop
    return make
