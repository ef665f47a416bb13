"""The packing bounds (``compaction.packing``): a lower bound per resource, and first fit
decreasing as a textbook writes it."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from compaction import packing


@pytest.mark.parametrize(("items", "capacity", "lower", "ffd"), [
    ([], (4, 4), 0, 0),
    ([(1, 1)] * 4, (4, 4), 1, 1),
    ([(3, 1), (3, 1), (2, 1)], (4, 4), 2, 3),  # 8/4 = 2, but no two of 3 share a node
    ([(1, 3), (1, 3)], (4, 4), 2, 2),  # memory decides
    ([(5, 1)], (4, 4), 2, 1),  # larger than a node: it still takes one
])
def test_packing_bounds(items: list[tuple[int, int]], capacity: tuple[int, int], lower: int,
                        ffd: int) -> None:
    assert packing.lower_bound_of(items, capacity) == lower
    assert packing.ffd(items, capacity) == ffd


def _first_fit_decreasing(items: Sequence[tuple[int, ...]], capacity: tuple[int, ...],
                          opened: Sequence[tuple[int, ...]] = ()) -> int:
    """First fit decreasing as written in a textbook: every item scans every node."""
    bins = [list(b) for b in opened]
    for item in sorted(items, key=lambda i: max(x / c for x, c in zip(i, capacity, strict=True)
                                                if c > 0), reverse=True):
        for b in bins:
            if all(u + x <= c for u, x, c in zip(b, item, capacity, strict=True)):
                for k, x in enumerate(item):
                    b[k] += x
                break
        else:
            bins.append(list(item))
    return len(bins)


@pytest.mark.parametrize("seed", range(20))
def test_ffd_packs_as_the_textbook_first_fit_decreasing_does(seed: int) -> None:
    rng = random.Random(seed)
    shapes = [(rng.choice([50, 100, 250, 900]), rng.choice([64, 128, 512, 2048]), 1)
              for _ in range(rng.randint(1, 6))]
    items = [rng.choice(shapes) for _ in range(rng.randint(0, 400))]
    capacity = (4000, 16384, 110)
    opened = [(rng.randint(0, 3000), rng.randint(0, 9000), 3) for _ in range(rng.randint(0, 5))]
    assert packing.ffd(items, capacity, opened) == _first_fit_decreasing(items, capacity, opened)
