"""The race's paired statistics: the exact sign-flip test, the median of the differences, and
the bootstrap interval only from 10 pairs up."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from localcluster.bench.race.stats import (
    bootstrap_median,
    describe,
    differences,
    paired,
    sign_flip_p,
)

diffs_st = st.lists(st.integers(min_value=-50, max_value=50).map(float), min_size=1,
                    max_size=10)


def test_all_positive_differences_give_the_smallest_p_of_their_count() -> None:
    # 2 of the 2**n flips (all +, all -) reach the observed |sum|.
    assert sign_flip_p([1.0] * 6) == pytest.approx(2 / 64)
    assert sign_flip_p([1.0] * 5) == pytest.approx(2 / 32)  # never below 0.05 with 5 pairs


def test_a_known_case_by_hand() -> None:
    # |sum| = 4; flips of (3, 1, -0): sums 4, 2, -2, -4 (each twice for the 0) -> 4 of 8.
    assert sign_flip_p([3.0, 1.0, 0.0]) == pytest.approx(0.5)


def test_no_pair_no_p_value() -> None:
    assert sign_flip_p([]) is None
    assert describe(paired([], [])) == "no pair"


def test_paired_samples_of_different_length_are_refused() -> None:
    with pytest.raises(ValueError):
        differences([1.0], [1.0, 2.0])


def test_bootstrap_only_from_ten_pairs() -> None:
    assert bootstrap_median([1.0] * 9) is None
    low, high = bootstrap_median([float(i) for i in range(10)]) or (0.0, 0.0)
    assert 0.0 <= low <= 4.5 <= high <= 9.0


def test_paired_reports_the_median_of_a_minus_b() -> None:
    p = paired([10.0, 12.0, 9.0], [8.0, 8.0, 10.0])
    assert p.n == 3 and p.median_difference == 2.0 and p.interval is None
    assert not p.significant


@given(diffs_st)
def test_p_is_a_probability_at_least_the_two_extreme_flips(diffs: list[float]) -> None:
    p = sign_flip_p(diffs)
    assert p is not None
    assert 2 / 2 ** len(diffs) - 1e-12 <= p <= 1.0 or all(d == 0 for d in diffs)


@given(diffs_st)
def test_p_does_not_depend_on_the_sign_or_order_of_the_differences(diffs: list[float]) -> None:
    p = sign_flip_p(diffs)
    assert sign_flip_p([-d for d in diffs]) == pytest.approx(p)
    assert sign_flip_p(list(reversed(diffs))) == pytest.approx(p)


@given(diffs_st)
def test_all_zero_differences_are_never_significant(diffs: list[float]) -> None:
    assert sign_flip_p([0.0] * len(diffs)) == 1.0
