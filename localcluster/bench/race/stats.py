"""Paired statistics over seeds (pure): the median of the paired differences, an exact
sign-flip permutation test, and a bootstrap interval only where there are enough pairs.

The sign-flip test asks how often flipping the signs of the differences (what the two arms
being alike would allow) gives a mean at least as far from zero as the one observed; with n
pairs there are 2**n flips, all enumerated. With fewer than 6 pairs no two-sided p-value can
fall below 0.05 (the smallest is 2/2**n).
"""

from __future__ import annotations

import itertools
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

MIN_BOOTSTRAP_PAIRS: Final = 10
MAX_EXACT_PAIRS: Final = 20  # 2**20 flips; beyond that the test is not exact


@dataclass(frozen=True)
class Paired:
    """Arm ``a`` against arm ``b`` on one figure: differences are a − b per seed."""

    n: int
    median_difference: float | None
    p_value: float | None  # two-sided, exact; None without a pair
    interval: tuple[float, float] | None  # 95 % bootstrap of the median; None under 10 pairs

    @property
    def significant(self) -> bool:
        return self.p_value is not None and self.p_value < 0.05


def differences(a: Sequence[float], b: Sequence[float]) -> list[float]:
    if len(a) != len(b):
        raise ValueError("paired samples differ in length")
    return [x - y for x, y in zip(a, b, strict=True)]


def sign_flip_p(diffs: Sequence[float]) -> float | None:
    """The exact two-sided p-value of the mean difference under sign flips."""
    n = len(diffs)
    if n == 0:
        return None
    if n > MAX_EXACT_PAIRS:
        raise ValueError(f"{n} pairs: more than the exact test enumerates")
    observed = abs(sum(diffs))
    eps = 1e-9 * max(1.0, observed)
    hits = sum(1 for signs in itertools.product((1, -1), repeat=n)
               if abs(sum(s * d for s, d in zip(signs, diffs, strict=True))) >= observed - eps)
    return hits / (1 << n)


def bootstrap_median(diffs: Sequence[float], rounds: int = 10_000, seed: int = 0
                     ) -> tuple[float, float] | None:
    """The percentile 95 % interval of the median difference, only from 10 pairs up."""
    if len(diffs) < MIN_BOOTSTRAP_PAIRS:
        return None
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(diffs, k=len(diffs))) for _ in range(rounds))
    return meds[int(0.025 * rounds)], meds[min(rounds - 1, int(0.975 * rounds))]


def paired(a: Sequence[float], b: Sequence[float]) -> Paired:
    d = differences(a, b)
    return Paired(len(d), statistics.median(d) if d else None, sign_flip_p(d),
                  bootstrap_median(d))


def describe(p: Paired, unit: str = "") -> str:
    """One cell of the paired table."""
    if p.n == 0 or p.median_difference is None:
        return "no pair"
    text = f"{p.median_difference:+.3g}{unit}, p = {p.p_value:.3g} (n = {p.n})"
    if p.interval is not None:
        text += f", 95 % CI {p.interval[0]:+.3g} to {p.interval[1]:+.3g}"
    return text
