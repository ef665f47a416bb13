"""The race's recorder, with the API server faked (``timeline.sample`` and the cluster's
client are the boundary here): its first sample is the restored start, taken by the caller
of ``start`` before the arm begins; the rest come from its thread."""

from __future__ import annotations

import threading
import time
from typing import Any, cast

import pytest

from localcluster.bench.race import timeline
from localcluster.bench.race.timeline import Recorder, Sample


class _Client:
    def close(self) -> None:
        pass


class _Cluster:
    def client(self) -> _Client:
        return _Client()


def _recorder(monkeypatch: pytest.MonkeyPatch, interval: float) -> tuple[Recorder, list[bool]]:
    """A recorder whose samples say whether the caller of ``start`` took them."""
    caller = threading.current_thread()
    by_caller: list[bool] = []

    def fake_sample(kube: object, pool: str, t: float) -> Sample:
        by_caller.append(threading.current_thread() is caller)
        return Sample(t, (), 0, (), ())

    monkeypatch.setattr(timeline, "sample", fake_sample)
    return Recorder(cast(Any, _Cluster()), "pool", interval=interval), by_caller


def test_the_recorder_samples_the_start_before_start_returns_with_the_api_faked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    recorder, by_caller = _recorder(monkeypatch, interval=60.0)
    recorder.start()
    taken = list(by_caller)  # what the arm, beginning now, comes after
    recorder.stop()
    assert taken == [True] and recorder.samples[0].t == 0.0


def test_the_recorders_thread_samples_after_the_start_with_the_api_faked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    recorder, by_caller = _recorder(monkeypatch, interval=0.01)
    recorder.start()
    deadline = time.monotonic() + 30
    try:
        while len(by_caller) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        recorder.stop()
    assert by_caller[0] and len(by_caller) >= 2 and not any(by_caller[1:]), by_caller
