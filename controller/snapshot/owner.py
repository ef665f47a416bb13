"""Intermediate owners (ReplicaSets, Jobs): steps of a Pod's owner chain, never read for intent.
Pure."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.snapshot.fields import controller_of, meta, parse_time, section, str_map

OwnerKey = tuple[str, str, str]  # kind, namespace, name


@dataclass(frozen=True, slots=True)
class OwnerInfo:
    """An intermediate owner (ReplicaSet, Job): only a step of a Pod's owner chain."""

    kind: str
    namespace: str
    name: str
    controller: tuple[str, str] | None
    annotations: Mapping[str, str]
    # A Job's creation and end: its Complete condition, or its Failed condition's
    # "<reason>: <message>" (what a descheduler run that failed reports).
    created: datetime.datetime | None = None
    complete: bool = False
    failure: str = ""

    @property
    def key(self) -> OwnerKey:
        return self.kind, self.namespace, self.name


def owner_parser(kind: str) -> Callable[[Mapping[str, Any]], OwnerInfo]:
    def parse(obj: Mapping[str, Any]) -> OwnerInfo:
        m = meta(obj)
        info = OwnerInfo(kind, str(m.get("namespace") or ""), str(m.get("name") or ""),
                         controller_of(m), str_map(m.get("annotations")))
        if kind != "Job":
            return info
        ended = {str(c.get("type")): c for c in section(obj, "status").get("conditions") or []
                 if isinstance(c, Mapping) and c.get("status") == "True"}
        failed = ended.get("Failed")
        failure = "" if failed is None else ": ".join(
            str(failed[k]) for k in ("reason", "message") if failed.get(k)) or "Failed"
        return dataclasses.replace(info, created=parse_time(m.get("creationTimestamp")),
                                   complete="Complete" in ended, failure=failure[:500])
    return parse
