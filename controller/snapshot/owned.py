"""The objects the controller created in its namespace, as the API server holds them now. Pure."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.snapshot.fields import meta, parse_time, revision, section, str_map


@dataclass(frozen=True)
class OwnedInfo:
    """An object the controller created in its namespace, as the API server holds it now."""

    kind: str
    name: str
    labels: Mapping[str, str]
    revision: str  # controller.snapshot.fields.revision: changes when its desired state changes
    available_replicas: int = 0
    created: datetime.datetime | None = None
    # A Deployment's ``Available`` condition: its status, and since when it has held it.
    available: bool | None = None
    available_changed: datetime.datetime | None = None

    @property
    def policy(self) -> str | None:
        return self.labels.get("compactor.dev/policy")


def parse_owned(kind: str, obj: Mapping[str, Any]) -> OwnedInfo:
    m, status = meta(obj), section(obj, "status")
    condition = next((c for c in status.get("conditions") or []
                      if isinstance(c, Mapping) and c.get("type") == "Available"), None)
    return OwnedInfo(kind, str(m.get("name") or ""), str_map(m.get("labels")),
                     revision(kind, obj), int(status.get("availableReplicas") or 0),
                     parse_time(m.get("creationTimestamp")),
                     None if condition is None else condition.get("status") == "True",
                     None if condition is None else parse_time(
                         condition.get("lastTransitionTime")))
