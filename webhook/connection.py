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
    ``guarded_protocol``)."""

    read_timeout: float = 5.0
    write_timeout: float = 5.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_deadline: asyncio.TimerHandle | None = None
        self._write_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_read()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        # Between requests the connection is idle (uvicorn's keep-alive timer governs it);
        # the first byte of the next request starts that request's deadline.
        if self._read_deadline is None and self.conn.their_state is h11.IDLE:
            self._arm_read()
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE and self.conn.their_state is not \
                h11.SEND_BODY:
            self._cancel_read()  # the whole request is in

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._cancel_read()

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

    def _arm_read(self) -> None:
        self._cancel_read()
        self._read_deadline = self.loop.call_later(
            self.read_timeout, self._expire, "did not send a whole request")

    def _cancel_read(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _disarm(self) -> None:
        self._cancel_read()
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def _expire(self, what: str) -> None:
        self._read_deadline = self._write_deadline = None
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
