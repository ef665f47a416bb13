"""Five-field cron schedules as a CronJob accepts them (minute hour day-of-month month weekday)."""

from __future__ import annotations

from typing import Final

_MONTHS: Final = {m: i + 1 for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"])}
_DAYS: Final = {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
_FIELDS: Final[tuple[tuple[str, int, int, dict[str, int]], ...]] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 6, _DAYS),
)


def cron_problems(expr: str) -> list[str]:
    """Every reason ``expr`` is not a five-field schedule; empty when it is valid."""
    fields = expr.split()
    if len(fields) != 5:
        hint = " (durations such as 30s or 1m are not schedules)" if len(fields) == 1 else ""
        return [f"must have 5 fields (minute hour day-of-month month day-of-week), "
                f"got {len(fields)}{hint}"]
    problems: list[str] = []
    for text, (name, lo, hi, names) in zip(fields, _FIELDS, strict=True):
        for part in text.split(","):
            err = _part_problem(part, lo, hi, names)
            if err:
                problems.append(f"{name} field {text!r}: {err}")
                break
    return problems


def _value(token: str, lo: int, hi: int, names: dict[str, int]) -> int:
    if token.lower() in names:
        return names[token.lower()]
    if not token.isdigit():
        raise ValueError(f"{token!r} is not a number")
    value = int(token)
    if not lo <= value <= hi:
        raise ValueError(f"{value} is out of range {lo}-{hi}")
    return value


def _part_problem(part: str, lo: int, hi: int, names: dict[str, int]) -> str | None:
    rng, _, step = part.partition("/")
    try:
        if step and (not step.isdigit() or int(step) == 0):
            return f"step {step!r} must be a positive number"
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
