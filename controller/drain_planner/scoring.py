"""How the compaction scheduler's profile scores a node for a Pod, as the simulation scores it.
Pure."""

from __future__ import annotations

from collections.abc import Mapping


def most_allocated(requested: Mapping[str, int], allocatable: Mapping[str, int]) -> float:
    """NodeResourcesFit's MostAllocated score on cpu and memory, weight 1 each (0-100)."""
    scores = []
    for resource in ("cpu", "memory"):
        capacity = allocatable.get(resource, 0)
        if capacity > 0:
            scores.append(min(requested.get(resource, 0), capacity) * 100 / capacity)
    return sum(scores) / len(scores) if scores else 0.0
