"""A workload's eviction budget, and the evictions Compactor counts against it. Pure.

A workload's owner limits how often Compactor may evict its Pods, the drains and the runtime
hook together, with the annotation ``compactor.dev/eviction-budget: "N/D"`` on the workload:
at most ``N`` evictions in any ``D``. ``N`` is a whole number (``0``: never), ``D`` a Go
duration longer than zero (``30m``, ``1h``, ``1h30m``). A value that does not read so allows
no eviction at all: a budget its owner meant to set is never taken for none.

Compactor counts an eviction when it decides it (a Pod it marks for its descheduler, a Pod
its runtime hook evicts) and writes it on the workload, in ``compactor.dev/evictions``: the
time and the Pod's uid of each, trimmed to what a rule still reads. So the count is the
cluster's, and a restarted controller spends no eviction twice. The same record says which
invalid budget value a Warning Event named last, so that one value is named once.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Final

import orjson

from compaction.duration import parse_duration

# More than any window could hold: a count past it is a typo, not a budget.
MAX_COUNT: Final = 1_000_000
# The record keeps this many evictions at most, the latest (an annotation is small).
MAX_RECORDED: Final = 1000
_FORM: Final = re.compile(r"(\d+)/(.+)")
_TIME: Final = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class EvictionBudget:
    """At most ``count`` evictions in any ``window``."""

    count: int
    window: datetime.timedelta

    def left(self, spent: Iterable[datetime.datetime], now: datetime.datetime) -> int:
        """The evictions still allowed now, ``spent`` being those counted so far."""
        return max(0, self.count - sum(1 for at in spent if now - at < self.window))


def parse_budget(text: str) -> EvictionBudget:
    """The budget ``text`` says; ValueError, with a reason a person can act on, when it says
    none."""
    match = _FORM.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not N/duration, such as 1/1h or 3/30m")
    count = int(match.group(1))
    if count > MAX_COUNT:
        raise ValueError(f"{text!r}: {count} evictions is more than {MAX_COUNT}")
    try:
        window = parse_duration(match.group(2))
    except ValueError as e:
        raise ValueError(f"{text!r}: {e}") from None
    return EvictionBudget(count, window)


@dataclass(frozen=True)
class Eviction:
    """One eviction: when (to the second, as the API keeps a Pod's creation), the Pod's uid,
    and the workload's Pods created within that second before it (``peers``), which are no
    replacements of it."""

    at: datetime.datetime
    pod_uid: str
    peers: tuple[str, ...] = ()


def _peers(rest: list[Any]) -> tuple[str, ...]:
    return tuple(str(u) for u in rest[0]) if rest and isinstance(rest[0], list) else ()


def _time(at: datetime.datetime) -> str:
    return at.astimezone(datetime.UTC).strftime(_TIME)


def _parse_time(text: Any) -> datetime.datetime | None:
    if not isinstance(text, str):
        return None
    try:
        at = datetime.datetime.strptime(text, _TIME)
    except ValueError:
        return None
    return at.replace(tzinfo=datetime.UTC)


@dataclass(frozen=True)
class Evictions:
    """The record on a workload: Compactor's evictions of its Pods, oldest first, and the
    invalid budget value last named in a Warning Event (empty: none)."""

    entries: tuple[Eviction, ...] = ()
    warned: str = ""

    @classmethod
    def parse(cls, text: str | None) -> Evictions:
        """The record ``text`` holds; an unreadable one reads as empty (the controller alone
        writes it)."""
        if not text:
            return cls()
        try:
            body = orjson.loads(text)
        except orjson.JSONDecodeError:
            return cls()
        if not isinstance(body, dict):
            return cls()
        raw = body.get("evictions")
        entries = [Eviction(at, str(e[1]), _peers(e[2:]))
                   for e in (raw if isinstance(raw, list) else ())
                   if isinstance(e, list) and len(e) in (2, 3) and (at := _parse_time(e[0]))]
        warned = body.get("warned")
        return cls(tuple(sorted(entries, key=lambda e: e.at)),
                   warned if isinstance(warned, str) else "")

    def render(self) -> str:
        body: dict[str, Any] = {}
        if self.entries:
            body["evictions"] = [[_time(e.at), e.pod_uid, *([list(e.peers)] if e.peers else [])]
                                 for e in self.entries]
        if self.warned:
            body["warned"] = self.warned
        return orjson.dumps(body).decode()

    @property
    def times(self) -> tuple[datetime.datetime, ...]:
        return tuple(e.at for e in self.entries)

    @property
    def uids(self) -> frozenset[str]:
        return frozenset(e.pod_uid for e in self.entries)

    def adding(self, uids: Iterable[str], now: datetime.datetime,
               peers: Iterable[str] = ()) -> Evictions:
        """With an eviction now of each Pod of ``uids`` not counted yet; ``peers``: the
        workload's Pods created within this second."""
        known, peers = self.uids, tuple(sorted(peers))
        at = now.replace(microsecond=0)
        new = tuple(Eviction(at, u, peers) for u in dict.fromkeys(uids) if u not in known)
        return replace(self, entries=(*self.entries, *new)[-MAX_RECORDED:]) if new else self

    def keeping(self, kept: Iterable[Eviction]) -> Evictions:
        return replace(self, entries=tuple(kept))
