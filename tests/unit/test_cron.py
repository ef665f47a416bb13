from __future__ import annotations

import pytest

from compaction.cron import cron_problems


@pytest.mark.parametrize("expr", [
    "*/30 * * * *", "0 */2 * * *", "0 * * * *", "5,35 1-5 * * mon-fri", "0 0 1 jan,jul *",
    "*/15 0-23/2 1-31 1-12 0-6", "0 3 * * SUN", "30 4 ? * ?",
])
def test_valid_schedules(expr: str) -> None:
    assert cron_problems(expr) == []


@pytest.mark.parametrize(("expr", "fragment"), [
    ("30s", "5 fields"), ("1m", "durations"), ("0 */5 * * * *", "got 6"), ("* * * *", "got 4"),
    ("60 * * * *", "out of range 0-59"), ("0 24 * * *", "out of range 0-23"),
    ("0 0 0 * *", "out of range 1-31"), ("0 0 * 13 *", "out of range 1-12"),
    ("0 0 * * 7", "out of range 0-6"), ("*/0 * * * *", "step"), ("5-1 * * * *", "ends before"),
    ("a * * * *", "not a number"), ("", "got 0"), ("*/ * * * *", "step ''"),
    ("\u0663 * * * *", "not a number"), ("0 0 * * \u017fun", "not a number"),
    ("*/" + "1" * 19 + " * * * *", "too large"), ("0\v* * * *", "got 4"),
    ("0," * 300 + "0 * * * *", "at most 512 characters"),
])
def test_invalid_schedules_say_why(expr: str, fragment: str) -> None:
    problems = cron_problems(expr)
    assert problems and fragment in problems[0]
