"""How few nodes a set of Pod requests could fit on. Pure.

Two numbers bracket the best packing: ``lower_bound`` (no packing needs fewer nodes: the sum
of the requests over one node's capacity, per resource, the largest) and ``ffd`` (the nodes a
first-fit-decreasing packing fills: a packing that exists, so an upper bound). Requests are
vectors of the same resources as the capacity, in any integer unit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

Vector = Sequence[int]


def _largest_share(item: Vector, capacity: Vector) -> float:
    return max((i / c for i, c in zip(item, capacity, strict=True) if c > 0), default=0.0)


def ffd(items: Sequence[Vector], capacity: Vector,
        opened: Sequence[Vector] = ()) -> int:
    """Nodes a first-fit-decreasing packing of ``items`` fills, into nodes of ``capacity``.
    ``opened``: what is already used on nodes that are open from the start (Pods that cannot
    move hold them), each counted whether or not an item goes there.

    Nodes only fill up, so a node that could not take an item cannot take an equal one
    later: each distinct request starts its search where the last equal one was placed. The
    packing is first fit's own, in time linear in the items and the nodes per distinct
    request (a cluster's Pods share a few requests per workload), not their product."""
    bins = [list(b) for b in opened]
    start: dict[tuple[int, ...], int] = {}
    for item in sorted(items, key=lambda i: _largest_share(i, capacity), reverse=True):
        key = tuple(item)
        at = start.get(key, 0)
        while at < len(bins) and not all(
                u + i <= c for u, i, c in zip(bins[at], item, capacity, strict=True)):
            at += 1
        if at == len(bins):
            bins.append([0] * len(item))
        b = bins[at]
        for k, i in enumerate(item):
            b[k] += i
        start[key] = at
    return len(bins)


def bounds_per_resource(items: Sequence[Vector], capacity: Vector) -> list[int]:
    """Per resource: the nodes of ``capacity`` the items' total needs at least (0 for a
    resource no node has)."""
    return [math.ceil(sum(i[k] for i in items) / c) if c > 0 else 0
            for k, c in enumerate(capacity)]


def lower_bound_of(items: Sequence[Vector], capacity: Vector) -> int:
    """No packing of ``items`` into nodes of ``capacity`` needs fewer nodes."""
    return max(bounds_per_resource(items, capacity), default=0) if items else 0


# The two-resource forms the local cluster's measurements use: (cpu, memory) pairs.


def ffd_packing(items: Sequence[tuple[int, int]], cpu: int, memory: int) -> int:
    """Nodes a first-fit-decreasing packing of (cpu, memory) requests fills: a packing that
    exists, so an upper bound on the optimum, not a lower bound."""
    return ffd(items, (cpu, memory))


def ffd_around(fixed: Mapping[str, tuple[int, int]], items: Sequence[tuple[int, int]],
               cpu: int, memory: int) -> int:
    """Nodes a first-fit-decreasing packing fills when some Pods cannot move: the nodes they
    hold are open bins from the start (with what they use), new bins after them."""
    return ffd(items, (cpu, memory), list(fixed.values()))


def lower_bound(items: Sequence[tuple[int, int]], cpu: int, memory: int, pods: int) -> int:
    """No packing needs fewer nodes: max(ceil(Σcpu/cap), ceil(Σmem/cap), ceil(count/podcap))."""
    return lower_bound_of([(c, m, 1) for c, m in items], (cpu, memory, pods))
