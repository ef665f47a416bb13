"""Request-based node utilisation, as the descheduler's HighNodeUtilization judges it."""

from __future__ import annotations

from dataclasses import dataclass

from compaction.policy import Thresholds


@dataclass(frozen=True)
class Utilization:
    """Percentages of allocatable: summed CPU and memory requests, and Pod count."""

    cpu: float
    memory: float
    pods: float


def is_underutilized(usage: Utilization, thresholds: Thresholds) -> bool:
    """A node is an eviction source only when every resource is at or below its threshold."""
    return (usage.cpu <= thresholds.cpu and usage.memory <= thresholds.memory
            and usage.pods <= thresholds.pods)
