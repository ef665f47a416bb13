"""A loopback TCP relay on a thread of its own: the balancer in front of webhook replicas, and
the link from Compactor's processes to the API server that a fault can slow down or cut.

TLS passes through untouched (the relay sees bytes, never requests), so the client still
verifies the server it reaches. Each connection goes to the next backend in turn; a backend
that refuses the connection is skipped for the next one, as a Service does once the dead
Pod's endpoint is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from collections.abc import Sequence

from localcluster.cluster.process import free_port

_CHUNK = 64 * 1024


class Relay:
    """``127.0.0.1:<port>`` forwarding to ``backends`` (loopback ports)."""

    def __init__(self, backends: Sequence[int], name: str = "relay") -> None:
        self.name = name
        self.port = free_port()
        self.backends = list(backends)
        self.delay = 0.0  # added to every chunk coming back from a backend
        self.connections = 0
        self.refused = 0  # connections no backend would take
        self._turn = itertools.count()
        self._open: set[asyncio.WriteTransport] = set()
        self._closed_until = 0.0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._stopping: asyncio.Event

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> Relay:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError(f"{self.name} did not start")
        return self

    def stop(self) -> None:
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(10)

    def __enter__(self) -> Relay:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def cut(self, refuse_for: float = 0.0) -> int:
        """Reset every open connection, and refuse new ones for ``refuse_for`` seconds (each
        is accepted and closed at once, as a restarting peer would); returns how many."""
        self._closed_until = time.monotonic() + refuse_for
        done = threading.Event()
        count = [0]

        def reset() -> None:
            count[0] = len(self._open)
            for transport in list(self._open):
                transport.abort()
            done.set()
        self._loop.call_soon_threadsafe(reset)
        done.wait(10)
        return count[0]

    # --- the relay's own thread ----------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())
        self._loop.close()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self._ready.set()
        await self._stopping.wait()
        server.close()
        for transport in list(self._open):
            transport.abort()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        await server.wait_closed()

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        backends = list(self.backends)
        start = next(self._turn)
        for i in range(len(backends)):
            port = backends[(start + i) % len(backends)]
            with contextlib.suppress(OSError):
                return await asyncio.open_connection("127.0.0.1", port)
        return None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        client = writer.transport
        if time.monotonic() < self._closed_until:
            client.abort()
            return
        upstream = await self._connect()
        if upstream is None:
            self.refused += 1
            client.abort()
            return
        up_reader, up_writer = upstream
        self._open.update((client, up_writer.transport))
        try:
            await asyncio.gather(self._pipe(reader, up_writer, delayed=False),
                                 self._pipe(up_reader, writer, delayed=True))
        finally:
            for transport in (client, up_writer.transport):
                self._open.discard(transport)
                transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    delayed: bool) -> None:
        """Copy until either side ends; with ``delayed``, each chunk leaves ``delay`` seconds
        after it arrived (later chunks queue behind it, so the order holds)."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                due, chunk = await queue.get()
                if not chunk:
                    return
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                writer.write(chunk)
                await writer.drain()
        sender = asyncio.ensure_future(send())
        try:
            while not sender.done():
                chunk = await reader.read(_CHUNK)
                queue.put_nowait((time.monotonic() + (self.delay if delayed else 0.0), chunk))
                if not chunk:
                    break
            await sender
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            sender.cancel()
            writer.transport.abort()
