"""A Node as the planner reads it: labels, allocatable, taints, readiness. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from compaction import quantity
from controller.snapshot.constraints import Taint
from controller.snapshot.fields import meta, section, str_map


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    allocatable: Mapping[str, int] = field(default_factory=dict)  # milli-units
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    resource_version: str = ""
    uid: str = ""


def parse_node(obj: Mapping[str, Any]) -> NodeInfo:
    m, spec, status = meta(obj), section(obj, "spec"), section(obj, "status")
    taints = tuple(Taint(str(t.get("key") or ""), str(t.get("value") or ""),
                         str(t.get("effect") or ""), str(t.get("timeAdded") or ""))
                   for t in spec.get("taints") or [] if isinstance(t, Mapping))
    return NodeInfo(
        str(m.get("name") or ""), str_map(m.get("labels")),
        quantity.to_milli(section(status, "allocatable")), taints,
        bool(spec.get("unschedulable")),
        any(isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []),
        str(m.get("resourceVersion") or ""), str(m.get("uid") or ""))
