"""The API server's audit log as records: who created or evicted which Pod, when, and what the
API server answered. What a fault cost is counted from here, not from Compactor's own view."""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson


@dataclass(frozen=True)
class AuditEvent:
    at: datetime.datetime  # when the API server received the request
    verb: str
    user: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int
    dry_run: bool

    @property
    def ok(self) -> bool:
        return 200 <= self.code < 300


def _time(raw: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(raw.replace("Z", "+00:00"))


def parse(line: bytes) -> AuditEvent | None:
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None  # the line being written as we read
    if not isinstance(event, dict) or event.get("stage") != "ResponseComplete":
        return None
    ref = event.get("objectRef") or {}
    status = event.get("responseStatus") or {}
    return AuditEvent(
        at=_time(event["requestReceivedTimestamp"]), verb=str(event.get("verb", "")),
        user=str((event.get("user") or {}).get("username", "")),
        resource=str(ref.get("resource", "")), subresource=str(ref.get("subresource", "")),
        namespace=str(ref.get("namespace", "")), name=str(ref.get("name", "")),
        code=int(status.get("code", 0)), dry_run="dryRun=" in str(event.get("requestURI", "")))


class AuditLog:
    """Reads the log as it grows (across API server restarts, which append)."""

    def __init__(self, file: Path) -> None:
        self.file = file
        self._offset = 0
        self.events: list[AuditEvent] = []

    def read(self) -> list[AuditEvent]:
        """Every event so far, the new ones parsed now."""
        if not self.file.exists():
            return self.events
        with self.file.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        whole = data[:data.rfind(b"\n") + 1]
        self._offset += len(whole)
        self.events.extend(e for line in whole.splitlines() if (e := parse(line)))
        return self.events

    def between(self, start: datetime.datetime, end: datetime.datetime) -> list[AuditEvent]:
        return [e for e in self.read() if start <= e.at <= end]


def pod_creations(events: Iterable[AuditEvent], namespaces: Iterable[str]
                  ) -> list[AuditEvent]:
    """Pod creations that were real (no dry run) in these namespaces."""
    wanted = set(namespaces)
    return [e for e in events if e.verb == "create" and e.resource == "pods"
            and not e.subresource and not e.dry_run and e.namespace in wanted]


def evictions(events: Iterable[AuditEvent]) -> list[AuditEvent]:
    return [e for e in events if e.verb == "create" and e.resource == "pods"
            and e.subresource == "eviction"]
