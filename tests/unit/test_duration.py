from __future__ import annotations

from datetime import timedelta

import pytest

from compaction.duration import parse_duration


@pytest.mark.parametrize(("text", "expected"), [
    ("15m", timedelta(minutes=15)), ("1h30m", timedelta(hours=1, minutes=30)),
    ("90s", timedelta(seconds=90)), ("1.5h", timedelta(minutes=90)),
    ("500ms", timedelta(milliseconds=500)), ("2h0m5s", timedelta(hours=2, seconds=5)),
])
def test_go_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "15", "m", "15 m", "1d", "-5m", "0s", "1h-3m", "15mm",
                                  "99999999999999999h", "9" * 400 + "h"])
def test_non_durations_are_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)

