"""Go-style durations (``15m``, ``1h30m``, ``90s``), as ``time.ParseDuration`` reads them."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Final

_UNITS: Final = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
}
_PART: Final = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> timedelta:
    """Parse a positive Go duration; raises ValueError with a readable reason."""
    if not text:
        raise ValueError("empty duration")
    pos, seconds = 0, 0.0
    for m in _PART.finditer(text):
        if m.start() != pos:
            break
        seconds += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(text):
        raise ValueError(f"{text!r} is not a duration like 15m, 1h30m or 90s")
    if seconds <= 0:
        raise ValueError(f"{text!r} must be longer than zero")
    try:
        return timedelta(seconds=seconds)
    except OverflowError:  # past what Go (and the CRD's duration()) reads long before
        raise ValueError(f"{text!r} is too long") from None

