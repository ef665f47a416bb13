"""A drain plan: the nodes a policy takes part in draining, the nodes of its Pods that stay and why,
and what each of its descheduler's runs evicts. Pure."""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from compaction.policy import DeschedulerSpec
from compaction.workload import WorkloadType
from controller.drain_planner.reasons import Reason
from controller.drain_planner.sim_node import largest_first
from controller.snapshot.pod import PodInfo

DRAIN_TIMEOUT: Final = datetime.timedelta(hours=6)


@dataclass(frozen=True)
class Member:
    """What the pass decided for a Pod: its workload's kind and policy, and suppression."""

    kind: WorkloadType
    policy: str | None
    suppressed: bool


@dataclass(frozen=True)
class Unremovable:
    node: str
    reasons: tuple[Reason, ...]
    holds_pods: bool = False  # Pods of the policy run there (placeholders aside)


@dataclass(frozen=True)
class DrainPlan:
    """One policy's share of the plan, as its status shows it."""

    policy: str
    nodes_in_use: tuple[str, ...] = ()  # pool nodes running a Pod other than a DaemonSet's
    freeable: tuple[str, ...] = ()  # nodes the simulation empties, in the order it drains them
    draining: tuple[str, ...] = ()  # of those, the ones to drain now: tainted
    drained: tuple[str, ...] = ()  # tainted and empty of movable Pods now: untainted
    abandoned: tuple[Unremovable, ...] = ()  # tainted, but the plan no longer holds
    unremovable: tuple[Unremovable, ...] = ()
    # Per draining node, this policy's Pods its descheduler may evict next (they get the
    # draining label).
    evict: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    # Where the simulation put each Pod of a freeable node: (namespace, name) -> node.
    moves: Mapping[tuple[str, str], str] = field(default_factory=dict)
    # What freeing each freeable node costs: the evictions of every policy's Pods there.
    costs: Mapping[str, int] = field(default_factory=dict)


def evictions_per_run(pods: Sequence[PodInfo], spec: DeschedulerSpec) -> list[PodInfo]:
    """Of ``pods`` (one node's, in the order they should go), those one descheduler run
    evicts: within ``maxNoOfPodsToEvictPerNode``, ``...PerNamespace`` and ``...Total``, the
    limits the rendered policy hands the descheduler."""
    cap = min(spec.max_pods_to_evict_per_node, spec.max_pods_to_evict_total)
    per_namespace: Counter[str] = Counter()
    out: list[PodInfo] = []
    for pod in pods:
        if len(out) >= cap:
            break
        if per_namespace[pod.namespace] < spec.max_pods_to_evict_per_namespace:
            per_namespace[pod.namespace] += 1
            out.append(pod)
    return out


def next_evictions(movable: Sequence[PodInfo], spec: DeschedulerSpec
                   ) -> tuple[tuple[str, str], ...]:
    """A policy's Pods on a draining node that its descheduler may evict next: the largest
    first, as many as one run evicts. The simulation placed them in that order; evicted in
    another, a small Pod takes the room a larger one was planned into, the larger fits
    nowhere and the drain no longer holds. Each pass marks the next ones."""
    return tuple(p.key for p in evictions_per_run(sorted(movable, key=largest_first), spec))
