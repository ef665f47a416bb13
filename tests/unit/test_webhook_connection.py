"""The connection deadlines (webhook/connection.py) on uvicorn's own h11 protocol, fed bytes
through a stand-in transport: the boundary under test is what the protocol closes and when
(tests/integration/test_hostile_clients.py sends the same over real sockets).

Each test runs on an event loop with a virtual clock, which jumps to the next timer whenever
nothing else is ready: the deadlines are checked to the timer, with no wall-clock margin and
no wait."""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Coroutine
from typing import Any

import uvicorn
from uvicorn.server import ServerState

from webhook.connection import GuardedH11Protocol, guarded_protocol

T = 0.5  # the read and write timeouts of these tests, in seconds
BODY = b'{"apiVersion":"admission.k8s.io/v1"}'
HEAD = (b"POST /mutate HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(BODY)).encode() + b"\r\n\r\n")


class _Clock:
    now = 0.0


class _IdleJumpsSelector(selectors.DefaultSelector):
    """Polls without blocking; where the loop would wait ``timeout`` for I/O, the virtual
    clock moves on by that much instead (the loop's timeout is its next timer's)."""

    def __init__(self, clock: _Clock) -> None:
        super().__init__()
        self.clock = clock

    def select(self, timeout: float | None = None) -> list[Any]:
        events: list[Any] = super().select(0)
        if not events and timeout:
            self.clock.now += timeout
        return events


class VirtualClockLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self.clock = _Clock()
        super().__init__(_IdleJumpsSelector(self.clock))

    def time(self) -> float:
        return self.clock.now


def on_virtual_clock(test: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    def run() -> None:
        with asyncio.Runner(loop_factory=VirtualClockLoop) as runner:
            runner.run(test())
    run.__name__ = test.__name__
    return run


class Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.aborted = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8443), "peername": ("127.0.0.1", 50000)}.get(
            name, default)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def is_closing(self) -> bool:
        return self.aborted

    def abort(self) -> None:
        self.aborted = True

    def close(self) -> None:
        self.aborted = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def _app(scope: Any, receive: Any, send: Any) -> None:
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def _connect() -> tuple[GuardedH11Protocol, Transport]:
    guarded = guarded_protocol(T, T)
    config = uvicorn.Config(_app, http=guarded, lifespan="off", timeout_keep_alive=120,
                            log_config=None)
    config.load()
    protocol = guarded(config=config, server_state=ServerState(), app_state={},
                       _loop=asyncio.get_running_loop())
    transport = Transport()
    protocol.connection_made(transport)
    return protocol, transport


async def _answered(transport: Transport, count: int) -> None:
    async with asyncio.timeout(1):
        while transport.written.count(b"HTTP/1.1 200") < count:
            await asyncio.sleep(0.001)


@on_virtual_clock
async def test_a_connection_that_sends_nothing_is_closed_after_the_read_timeout() -> None:
    _, transport = _connect()
    await asyncio.sleep(T * 0.5)
    assert not transport.aborted
    await asyncio.sleep(T)
    assert transport.aborted


@on_virtual_clock
async def test_a_request_sent_whole_leaves_the_idle_connection_open() -> None:
    protocol, transport = _connect()
    for n in range(1, 4):
        protocol.data_received(HEAD + BODY)
        await _answered(transport, n)
    await asyncio.sleep(T * 2)  # idle: uvicorn's keep-alive timer governs it, not ours
    assert not transport.aborted


@on_virtual_clock
async def test_each_request_has_the_read_timeout_from_its_own_first_byte() -> None:
    protocol, transport = _connect()
    protocol.data_received(HEAD + BODY)
    await _answered(transport, 1)
    await asyncio.sleep(T * 0.9)
    protocol.data_received(HEAD)  # the next request begins, and its body never comes
    await asyncio.sleep(T * 0.5)  # past the connection's first deadline, within this one's
    assert not transport.aborted
    await asyncio.sleep(T)
    assert transport.aborted


@on_virtual_clock
async def test_a_request_head_sent_byte_by_byte_gets_no_more_time() -> None:
    protocol, transport = _connect()
    protocol.data_received(HEAD + BODY)
    await _answered(transport, 1)
    await asyncio.sleep(T * 0.1)
    for byte in HEAD:
        protocol.data_received(bytes([byte]))
        if transport.aborted:
            break
        await asyncio.sleep(T * 1.3 / len(HEAD))
    assert transport.aborted


@on_virtual_clock
async def test_a_response_the_client_does_not_read_must_drain_within_the_write_timeout(
        ) -> None:
    protocol, transport = _connect()
    protocol.data_received(HEAD + BODY)
    await _answered(transport, 1)
    protocol.pause_writing()
    await asyncio.sleep(T * 0.5)
    protocol.resume_writing()  # drained in time
    await asyncio.sleep(T)
    assert not transport.aborted
    protocol.pause_writing()
    await asyncio.sleep(T * 1.5)
    assert transport.aborted


@on_virtual_clock
async def test_a_closed_connection_leaves_no_deadline_behind() -> None:
    protocol, transport = _connect()
    protocol.data_received(HEAD)
    protocol.connection_lost(None)
    transport.aborted = False
    await asyncio.sleep(T * 1.5)
    assert not transport.aborted
