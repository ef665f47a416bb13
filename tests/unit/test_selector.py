"""Label selectors behave exactly as metav1.LabelSelector does."""

from __future__ import annotations

from typing import Any

import pytest

from compaction.problem import Problem
from compaction.selector import LabelSelector, Operator, parse_selector, requirement


def _sel(raw: Any, wildcards: bool = False) -> LabelSelector:
    problems: list[Problem] = []
    sel = parse_selector(raw, "sel", problems, allow_wildcards=wildcards)
    assert problems == []
    return sel


CASES = [
    ("empty-matches-all", {}, {"a": "1"}, True),
    ("match-labels-hit", {"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
    ("match-labels-miss-value", {"matchLabels": {"a": "1"}}, {"a": "2"}, False),
    ("match-labels-miss-key", {"matchLabels": {"a": "1"}}, {}, False),
    ("in-hit", {"matchExpressions": [{"key": "t", "operator": "In", "values": ["x", "y"]}]},
     {"t": "y"}, True),
    ("in-absent-key", {"matchExpressions": [{"key": "t", "operator": "In", "values": ["x"]}]},
     {}, False),
    ("notin-absent-key-matches",
     {"matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["x"]}]}, {}, True),
    ("notin-other-value",
     {"matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["x"]}]}, {"t": "z"}, True),
    ("notin-listed-value",
     {"matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["x"]}]}, {"t": "x"}, False),
    ("exists", {"matchExpressions": [{"key": "t", "operator": "Exists"}]}, {"t": ""}, True),
    ("exists-miss", {"matchExpressions": [{"key": "t", "operator": "Exists"}]}, {}, False),
    ("does-not-exist", {"matchExpressions": [{"key": "t", "operator": "DoesNotExist"}]}, {}, True),
    ("does-not-exist-miss",
     {"matchExpressions": [{"key": "t", "operator": "DoesNotExist"}]}, {"t": "1"}, False),
    ("labels-and-expressions-are-anded",
     {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]},
     {"a": "1"}, False),
]


@pytest.mark.parametrize(("raw", "labels", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_matching(raw: dict[str, Any], labels: dict[str, str], expected: bool) -> None:
    assert _sel(raw).matches(labels) is expected


def test_render_uses_the_set_based_string_form() -> None:
    sel = _sel({"matchLabels": {"compactor.dev/policy": "p"}, "matchExpressions": [
        {"key": "tier", "operator": "NotIn", "values": ["b", "a"]},
        {"key": "x", "operator": "Exists"}, {"key": "y", "operator": "DoesNotExist"}]})
    assert sel.render() == "compactor.dev/policy in (p),tier notin (a,b),x,!y"


def test_wildcards_rejected_unless_allowed() -> None:
    problems: list[Problem] = []
    parse_selector({"matchExpressions": [{"key": "k", "operator": "In", "values": ["b-*"]}]},
                   "sel", problems)
    assert [p.path for p in problems] == ["sel.matchExpressions[0].values"]


def test_wildcards_expand_against_observed_values() -> None:
    sel = _sel({"matchExpressions": [
        {"key": "pool", "operator": "In", "values": ["batch-*", "gpu"]},
        {"key": "zone", "operator": "NotIn", "values": ["*-c"]}]}, wildcards=True)
    observed = {"pool": ["batch-a", "web", "batch-b"], "zone": ["eu-a", "eu-c", "us-c"]}
    assert sel.expand_wildcards(observed).requirements == (
        requirement("pool", Operator.IN, "batch-a", "batch-b", "gpu"),
        requirement("zone", Operator.NOT_IN, "eu-c", "us-c"),
    )


def test_wildcard_in_matching_nothing_still_matches_nothing() -> None:
    sel = _sel({"matchExpressions": [{"key": "pool", "operator": "In", "values": ["batch-*"]}]},
               wildcards=True)
    expanded = sel.expand_wildcards({"pool": ["web"]})
    assert not expanded.matches({"pool": "web"})
    assert not expanded.matches({"pool": "batch-*"})
    assert not expanded.matches({})
    # The form the descheduler's label parser accepts: no '*' in a value.
    assert expanded.render() == "pool,!pool"
