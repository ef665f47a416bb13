"""Where the Pods a drain evicts come back, against where the plan sent them. Pure.

A plan is only worth what the cluster then does. Each Pod marked for eviction carries the node
the plan sends it to (``compactor.dev/planned-node``); when it is gone, the next new Pod of its
workload that a scheduler binds is its replacement (the oldest departure first), and lands on
the planned node, on another node the plan keeps, or on a node the plan counted as free, which
spends an eviction for nothing. The counts live in this process only: a restarted controller
follows the drains from its first pass on.
"""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from controller.snapshot.pod import PodInfo
from controller.snapshot.workload import WorkloadKey

PodKey = tuple[str, str]  # namespace, name
# A departure no replacement matched in this long is dropped (its workload was scaled down).
WAIT: Final = datetime.timedelta(minutes=10)


class Outcome(StrEnum):
    PLANNED = "planned_node"
    KEPT = "kept_node"
    FREE = "free_node"


@dataclass(frozen=True)
class Mark:
    """A Pod marked for eviction: its workload and policy, where the plan sends it, and the
    nodes the plan counted as free then."""

    workload: WorkloadKey
    policy: str
    planned: str
    free: frozenset[str]


@dataclass(frozen=True)
class Departure:
    pod: PodKey
    mark: Mark
    left: datetime.datetime


@dataclass(frozen=True)
class Landings:
    """What one pass hands the next: the Pods marked, those gone and not yet replaced, the
    bound Pods seen (a Pod not among them is new), and the landings so far per policy."""

    marked: Mapping[PodKey, Mark] = field(default_factory=dict)
    departed: tuple[Departure, ...] = ()
    known: frozenset[PodKey] = frozenset()
    counts: Mapping[tuple[str, Outcome], int] = field(default_factory=dict)

    def of(self, policy: str) -> dict[Outcome, int]:
        return {o: self.counts.get((policy, o), 0) for o in Outcome}


def follow(state: Landings, pods: Iterable[PodInfo], workload_of: Mapping[PodKey, WorkloadKey],
           marks: Mapping[PodKey, Mark], now: datetime.datetime
           ) -> tuple[Landings, list[tuple[str, Outcome]]]:
    """The next state, and this pass's landings (policy, outcome). ``workload_of``: each Pod's
    workload as this pass decided it; ``marks``: the Pods this pass marks."""
    pods = list(pods)
    present = {p.key: p for p in pods if not p.deleting}
    departed = [d for d in state.departed if now - d.left < WAIT]
    leaving = {d.pod for d in departed}
    for key, mark in state.marked.items():
        if key not in present and key not in leaving:
            departed.append(Departure(key, mark, now))
    landed: list[tuple[str, Outcome]] = []
    counts = Counter(state.counts)
    bound = sorted((p for p in present.values() if p.node_name),
                   key=lambda p: (p.created or now, p.key))
    for pod in bound:
        workload = workload_of.get(pod.key)
        if pod.key in state.known or workload is None:
            continue
        match = next((d for d in departed if d.mark.workload == workload), None)
        if match is None:
            continue
        departed.remove(match)
        mark = match.mark
        outcome = (Outcome.PLANNED if pod.node_name == mark.planned
                   else Outcome.FREE if pod.node_name in mark.free else Outcome.KEPT)
        landed.append((mark.policy, outcome))
        counts[(mark.policy, outcome)] += 1
    known = frozenset(p.key for p in bound)
    return Landings(dict(marks), tuple(departed), known, dict(counts)), landed
