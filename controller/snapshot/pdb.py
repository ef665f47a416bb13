"""A PodDisruptionBudget as the planner reads it. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from compaction.problem import Problem
from compaction.selector import LabelSelector, parse_selector
from controller.snapshot.fields import meta, section
from controller.snapshot.pod import PodInfo


@dataclass(frozen=True)
class PdbInfo:
    """A PodDisruptionBudget as the planner reads it: whom it covers, what it allows now."""

    namespace: str
    name: str
    selector: LabelSelector | None  # policy/v1: none selects no Pod, an empty one every Pod
    disruptions_allowed: int

    def covers(self, pod: PodInfo) -> bool:
        return (self.selector is not None and pod.namespace == self.namespace
                and self.selector.matches(pod.labels))


def parse_pdb(obj: Mapping[str, Any]) -> PdbInfo:
    m = meta(obj)
    raw = section(obj, "spec").get("selector")
    problems: list[Problem] = []
    selector = parse_selector(raw, "", problems, allow_wildcards=True) if raw is not None \
        else None
    return PdbInfo(str(m.get("namespace") or ""), str(m.get("name") or ""),
                   None if problems else selector,
                   int(section(obj, "status").get("disruptionsAllowed") or 0))
