"""A PodDisruptionBudget as the planner reads it. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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


def eviction_refused(pod: PodInfo, pdbs: Iterable[PdbInfo]) -> PdbInfo | tuple[PdbInfo, ...] | None:
    """What makes the Eviction API refuse the Pod now: the one budget that covers it and
    allows no disruption, or every budget when more than one covers it (the eviction
    subresource supports one budget per Pod, and refuses the Pod for as long as two match).
    None when an eviction may go through."""
    covering = tuple(p for p in pdbs if p.covers(pod))
    if len(covering) > 1:
        return covering
    if covering and covering[0].disruptions_allowed <= 0:
        return covering[0]
    return None


def by_namespace(pdbs: Iterable[PdbInfo]) -> dict[str, tuple[PdbInfo, ...]]:
    """The budgets per namespace: a budget covers only the Pods of its own, so a plan reads
    each Pod against those alone, not against every budget in the cluster."""
    grouped: dict[str, list[PdbInfo]] = {}
    for pdb in pdbs:
        grouped.setdefault(pdb.namespace, []).append(pdb)
    return {namespace: tuple(group) for namespace, group in grouped.items()}


def parse_pdb(obj: Mapping[str, Any]) -> PdbInfo:
    m = meta(obj)
    raw = section(obj, "spec").get("selector")
    problems: list[Problem] = []
    selector = parse_selector(raw, "", problems, allow_wildcards=True) if raw is not None \
        else None
    return PdbInfo(str(m.get("namespace") or ""), str(m.get("name") or ""),
                   None if problems else selector,
                   int(section(obj, "status").get("disruptionsAllowed") or 0))
