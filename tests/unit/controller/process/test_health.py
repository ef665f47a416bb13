"""The controller's probes: /readyz once every cache has synced, /livez while the pass loop
comes round within its bound, both served beside /metrics from a thread of their own."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter

from controller.process.health import (
    Heartbeat,
    Probes,
    Verdict,
    liveness,
    readiness,
    serve,
)
from controller.process.settings import STALLED_AFTER_SECONDS, SettingsError, load


@pytest.mark.parametrize(("now", "verdict"), [
    (100.0, Verdict(True, "the pass loop came round 0 s ago")),
    (130.0, Verdict(True, "the pass loop came round 30 s ago")),
    (130.5, Verdict(False, "the pass loop has not come round for 30 s (bound 30 s)")),
], ids=["just-now", "at-the-bound", "past-it"])
def test_liveness_is_the_time_since_the_loop_came_round(now: float, verdict: Verdict) -> None:
    assert liveness(now, 100.0, 30.0) == verdict


def test_readiness_names_the_caches_not_synced() -> None:
    assert readiness([]) == Verdict(True, "caches synced")
    assert readiness(["/api/v1/pods", "/api/v1/nodes"]) == Verdict(
        False, "2 caches not synced: /api/v1/nodes, /api/v1/pods")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def served() -> Iterator[tuple[str, Clock, list[str]]]:
    clock, unsynced = Clock(), ["/api/v1/pods"]
    registry = CollectorRegistry()
    Counter("compactor_test_total", "a series to find", registry=registry).inc()
    server = serve(0, "127.0.0.1", registry,
                   Probes(Heartbeat(clock), 30.0, lambda: list(unsynced)))
    try:
        yield f"http://127.0.0.1:{server.server_port}", clock, unsynced
    finally:
        server.shutdown()
        server.server_close()


def test_the_probes_answer_beside_the_metrics(
        served: tuple[str, Clock, list[str]], caplog: pytest.LogCaptureFixture) -> None:
    url, clock, unsynced = served
    assert "compactor_test_total 1.0" in httpx.get(f"{url}/metrics").text
    ready = httpx.get(f"{url}/readyz")
    assert (ready.status_code, ready.text) == (503, "1 caches not synced: /api/v1/pods\n")
    unsynced.clear()
    assert httpx.get(f"{url}/readyz").status_code == 200
    assert httpx.get(f"{url}/livez").status_code == 200
    clock.now += 31  # nobody beat the heartbeat: the loop is stuck
    with caplog.at_level(logging.WARNING, "compactor.controller"):
        live = httpx.get(f"{url}/livez")
    assert (live.status_code, live.text) == (
        503, "the pass loop has not come round for 31 s (bound 30 s)\n")
    # Said in the log too: the restarted container's previous log tells why.
    assert "liveness probe failed: the pass loop has not come round for 31 s" in caplog.text


def test_the_bound_and_the_fault_are_settings() -> None:
    default = load({})
    assert default.stalled_after_seconds == STALLED_AFTER_SECONDS == 300.0
    assert default.fault_stall_after_seconds is None
    set_ = load({"COMPACTOR_CONTROLLER_STALLED_AFTER_SECONDS": "20",
                 "COMPACTOR_CONTROLLER_FAULT_STALL_AFTER_SECONDS": "0"})
    assert (set_.stalled_after_seconds, set_.fault_stall_after_seconds) == (20.0, 0.0)
    with pytest.raises(SettingsError) as e:
        load({"COMPACTOR_CONTROLLER_STALLED_AFTER_SECONDS": "5",
              "COMPACTOR_CONTROLLER_FAULT_STALL_AFTER_SECONDS": "-1"})
    # Below the idle loop's round, a healthy controller would be restarted.
    assert e.value.problems == [
        "COMPACTOR_CONTROLLER_STALLED_AFTER_SECONDS must be at least 10 (an idle loop comes "
        "round every 6 s), not '5'",
        "COMPACTOR_CONTROLLER_FAULT_STALL_AFTER_SECONDS must be 0 or more, not '-1'"]
