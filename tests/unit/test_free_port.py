"""Listening ports for the local cluster's processes: drawn where no outgoing connection can
take them before their server binds them."""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster.cluster import process
from localcluster.cluster.process import LISTEN_FLOOR, ephemeral_floor, free_port


def test_ports_are_drawn_below_the_ephemeral_range_and_never_twice() -> None:
    ceiling = max(ephemeral_floor(), LISTEN_FLOOR + 1000)
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(LISTEN_FLOOR <= p < ceiling for p in ports)


def test_a_port_somebody_listens_on_is_passed_over_with_the_draws_mocked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        port = next(p for p in range(LISTEN_FLOOR + 500, LISTEN_FLOOR + 900)
                    if p not in process._handed_out and _bindable(p))
        taken.bind(("127.0.0.1", port))
        taken.listen()
        draws: Iterator[int] = iter([port, port, port + 1, port + 2, port + 3])
        monkeypatch.setattr(random, "randrange", lambda *_: next(draws))
        assert free_port() != port


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.mark.parametrize(("text", "floor"), [
    ("40000\t60999\n", 40000), ("32768 60999", 32768), ("", 32768), (None, 32768)],
    ids=["set", "default", "empty", "missing"])
def test_the_floor_is_the_kernels_lowest_ephemeral_port(tmp_path: Path, text: str | None,
                                                         floor: int) -> None:
    file = tmp_path / "ip_local_port_range"
    if text is not None:
        file.write_text(text)
    assert ephemeral_floor(file) == floor
