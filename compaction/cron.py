"""Five-field cron schedules as a CronJob accepts them (minute hour day-of-month month weekday).

Only ASCII digits, names and separators count: the CRDs refuse the rest with regular
expressions (RE2), which must agree with this module value for value.
"""

from __future__ import annotations

import re
from typing import Final

# Longer schedules are refused: the CRDs' rules need a bounded string to stay within the API
# server's CEL cost budget.
MAX_LENGTH: Final = 512
# Beyond this a CronJob's parser (Go's strconv.Atoi) overflows.
MAX_STEP: Final = 10**18 - 1
# RE2's \s; Python's str.split() would also split on \v and Unicode spaces.
_SEPARATOR: Final = re.compile(r"[\t\n\f\r ]+")
_MONTHS: Final = {m: i + 1 for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"])}
_DAYS: Final = {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
FIELDS: Final[tuple[tuple[str, int, int, dict[str, int]], ...]] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 6, _DAYS),
)


def cron_problems(expr: str) -> list[str]:
    """Every reason ``expr`` is not a five-field schedule; empty when it is valid."""
    if len(expr) > MAX_LENGTH:
        return [f"must be at most {MAX_LENGTH} characters, not {len(expr)}"]
    fields = [f for f in _SEPARATOR.split(expr) if f]
    if len(fields) != 5:
        hint = " (durations such as 30s or 1m are not schedules)" if len(fields) == 1 else ""
        return [f"must have 5 fields (minute hour day-of-month month day-of-week), "
                f"got {len(fields)}{hint}"]
    problems: list[str] = []
    for text, (name, lo, hi, names) in zip(fields, FIELDS, strict=True):
        for part in text.split(","):
            err = _part_problem(part, lo, hi, names)
            if err:
                problems.append(f"{name} field {text!r}: {err}")
                break
    return problems


def _number(token: str) -> bool:
    return token.isascii() and token.isdigit()


def _value(token: str, lo: int, hi: int, names: dict[str, int]) -> int:
    if token.isascii() and token.lower() in names:
        return names[token.lower()]
    if not _number(token):
        raise ValueError(f"{token!r} is not a number")
    value = int(token)
    if not lo <= value <= hi:
        raise ValueError(f"{value} is out of range {lo}-{hi}")
    return value


def _part_problem(part: str, lo: int, hi: int, names: dict[str, int]) -> str | None:
    rng, slash, step = part.partition("/")
    try:
        if slash and (not _number(step) or int(step) == 0):
            return f"step {step!r} must be a positive number"
        if slash and int(step) > MAX_STEP:
            return f"step {step!r} is too large (at most {MAX_STEP})"
        if rng in ("*", "?"):
            return None
        start_s, dash, end_s = rng.partition("-")
        start = _value(start_s, lo, hi, names)
        if dash:
            end = _value(end_s, lo, hi, names)
            if end < start:
                return f"range {rng!r} ends before it starts"
    except ValueError as e:
        return str(e)
    return None
