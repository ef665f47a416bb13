"""The race's recorder, with the API server faked (``timeline.sample`` and the cluster's
client are the boundary here): its first sample is the restored start."""

from __future__ import annotations

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


def test_the_recorder_samples_the_start_before_the_arm_begins_with_the_api_faked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []  # what the cluster holds when each sample is taken
    state = ["the restored start"]

    def fake_sample(kube: object, pool: str, t: float) -> Sample:
        seen.append(state[0])
        return Sample(t, (), 0, (), ())

    monkeypatch.setattr(timeline, "sample", fake_sample)
    recorder = Recorder(cast(Any, _Cluster()), "pool", interval=0.01)
    recorder.start()
    state[0] = "the first rise"  # what an arm that begins at once does next
    try:
        time.sleep(0.05)
    finally:
        recorder.stop()
    assert seen[0] == "the restored start" and recorder.samples[0].t == 0.0
    assert len(seen) > 1 and set(seen[1:]) == {"the first rise"}
