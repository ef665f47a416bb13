"""The ``compactor.dev/eviction-budget`` value and the record of evictions counted against it,
as properties: every value reads as a budget or fails with ValueError (never anything else),
``N/duration`` reads as N in that duration, and the record survives its own text."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.duration import parse_duration
from compaction.eviction_budget import (
    MAX_COUNT,
    MAX_RECORDED,
    Eviction,
    EvictionBudget,
    Evictions,
    parse_budget,
)

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
UNITS = ("h", "m", "s", "ms")
DURATIONS = st.lists(st.tuples(st.integers(1, 999), st.sampled_from(UNITS)),
                     min_size=1, max_size=3).map(lambda ps: "".join(f"{n}{u}" for n, u in ps))


@given(st.text(max_size=40))
def test_any_text_is_a_budget_or_a_value_error(text: str) -> None:
    try:
        budget = parse_budget(text)
    except ValueError as e:
        assert str(e)  # says why
        return
    assert 0 <= budget.count <= MAX_COUNT and budget.window > datetime.timedelta(0)


@given(st.integers(0, MAX_COUNT), DURATIONS)
def test_n_per_duration_reads_as_n_in_that_duration(count: int, duration: str) -> None:
    assert parse_budget(f"{count}/{duration}") == EvictionBudget(count,
                                                                  parse_duration(duration))


@given(st.integers(MAX_COUNT + 1, 10**12), DURATIONS)
def test_a_count_past_the_most_is_refused(count: int, duration: str) -> None:
    with pytest.raises(ValueError, match="more than"):
        parse_budget(f"{count}/{duration}")


@pytest.mark.parametrize("text", [
    "", "1", "1h", "/1h", "1/", "-1/1h", "1/0s", "1/-1h", "one/1h", "1/1d", "1 per 1h",
    "1/1h/2", "1.5/1h"])
def test_values_that_are_no_budget(text: str) -> None:
    with pytest.raises(ValueError):
        parse_budget(text)


@given(st.integers(0, 20), st.lists(st.integers(0, 7200), max_size=30), st.integers(1, 7200))
def test_what_is_left_is_the_count_less_what_the_window_holds(
        count: int, ages: list[int], window: int) -> None:
    budget = EvictionBudget(count, datetime.timedelta(seconds=window))
    spent = [NOW - datetime.timedelta(seconds=a) for a in ages]
    left = budget.left(spent, NOW)
    assert left == max(0, count - sum(1 for a in ages if a < window))
    assert budget.left([*spent, NOW], NOW) == max(0, left - 1)


UIDS = st.text(alphabet="abcdef0123456789-", min_size=1, max_size=36)


@given(st.lists(st.tuples(st.integers(0, 10**6), UIDS, st.lists(UIDS, max_size=3)),
                max_size=20), st.text(max_size=20))
def test_the_record_survives_its_own_text(entries: list[tuple[int, str, list[str]]],
                                          warned: str) -> None:
    record = Evictions(tuple(sorted((Eviction(NOW - datetime.timedelta(seconds=s), u,
                                              tuple(peers))
                                     for s, u, peers in entries), key=lambda e: e.at)), warned)
    assert Evictions.parse(record.render()) == record


@given(st.text(max_size=60))
def test_an_unreadable_record_reads_as_empty_or_as_what_it_holds(text: str) -> None:
    record = Evictions.parse(text)
    assert Evictions.parse(record.render()) == record


def test_counting_a_pod_twice_counts_it_once_and_the_record_keeps_the_latest() -> None:
    record = Evictions().adding(["a", "b", "a"], NOW).adding(["b", "c"], NOW)
    assert [e.pod_uid for e in record.entries] == ["a", "b", "c"]
    many = Evictions().adding((str(i) for i in range(MAX_RECORDED + 5)), NOW)
    assert len(many.entries) == MAX_RECORDED and many.entries[-1].pod_uid == str(
        MAX_RECORDED + 4)
