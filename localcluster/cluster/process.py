"""Child processes of the local cluster: started with their logs on disk, stopped by PID."""

from __future__ import annotations

import contextlib
import random
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

# Listening ports are drawn from below the kernel's ephemeral range: a port from that range,
# free when drawn, can be taken before its server binds it as the source port of any
# outgoing connection (etcd once failed to start so, "bind: address already in use").
LISTEN_FLOOR: Final = 20000
_handed_out: set[int] = set()


def ephemeral_floor(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> int:
    """The lowest port the kernel gives outgoing connections (Linux's default 32768)."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A port nobody listens on right now, below the ephemeral range, drawn at random (so
    parallel runs seldom draw the same one) and never handed out twice by this process."""
    ceiling = ephemeral_floor()
    for _ in range(1000):
        port = random.randrange(LISTEN_FLOOR, max(ceiling, LISTEN_FLOOR + 1000))
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port from {LISTEN_FLOOR} to {ceiling}")


class StartupError(RuntimeError):
    """A component did not become healthy; the message carries the tail of its log."""


@dataclass
class Process:
    name: str
    argv: Sequence[str]
    log: Path
    env: dict[str, str] | None = None
    _popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self._popen = subprocess.Popen(
                list(self.argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self.env,
            )

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen else None

    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def wait_healthy(self, check: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running():
                raise StartupError(f"{self.name} exited during start-up:\n{self.tail()}")
            with contextlib.suppress(Exception):
                if check():
                    return
            time.sleep(0.1)
        raise StartupError(f"{self.name} not healthy after {timeout:.0f}s:\n{self.tail()}")

    def kill(self) -> None:
        """SIGKILL to this one PID (a crash: no shutdown handler runs), then reap it."""
        if self._popen is None or self._popen.poll() is not None:
            return
        self._popen.kill()
        self._popen.wait(10)

    def stop(self, grace: float = 10.0) -> None:
        """Terminate this one PID (never a group or a name), then kill it if it lingers."""
        if self._popen is None or self._popen.poll() is not None:
            return
        self._popen.terminate()
        try:
            self._popen.wait(grace)
        except subprocess.TimeoutExpired:
            self._popen.kill()
            self._popen.wait(grace)
