"""Effective-policy resolution: weight, specificity, age, name; order-independent (hypothesis)."""

from __future__ import annotations

import datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from compaction.policy import Policy
from compaction.precedence import effective_policy, rank
from compaction.validation import parse_policy
from compaction.workload import Workload, WorkloadType

W = Workload(kind=WorkloadType.DEPLOYMENT, namespace="prod-eu", name="web",
             labels={"tier": "web"})
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def _p(name: str, spec: dict[str, Any] | None = None, age_minutes: int = 0) -> Policy:
    created = (T0 - datetime.timedelta(minutes=age_minutes)).isoformat()
    return parse_policy({"metadata": {"name": name, "creationTimestamp": created},
                         "spec": spec or {}})


def test_higher_weight_wins_over_everything_else() -> None:
    specific = _p("specific", {"scope": {"labelSelector": {"matchLabels": {"tier": "web"}}}},
                  age_minutes=100)
    heavy = _p("heavy", {"weight": 1})
    assert effective_policy([specific, heavy], W) == heavy


def test_label_selector_beats_none() -> None:
    a = _p("a", age_minutes=10)
    b = _p("b", {"scope": {"labelSelector": {"matchLabels": {"tier": "web"}}}})
    assert effective_policy([a, b], W) == b


def test_exact_namespace_beats_wildcard_beats_notin_or_none() -> None:
    exact = _p("z-exact", {"scope": {"namespaceSelector": {"operator": "In",
                                                           "values": ["prod-eu"]}}})
    wild = _p("b-wild", {"scope": {"namespaceSelector": {"operator": "In",
                                                         "values": ["prod-*"]}}},
              age_minutes=5)
    notin = _p("a-notin", {"scope": {"namespaceSelector": {"operator": "NotIn",
                                                           "values": ["dev"]}}},
               age_minutes=10)
    none = _p("0-none", age_minutes=20)
    assert effective_policy([none, notin, wild, exact], W) == exact
    assert effective_policy([none, notin, wild], W) == wild
    # NotIn and no selector rank the same; the older one wins.
    assert effective_policy([notin, none], W) == none


def test_fewer_workload_types_beats_more() -> None:
    narrow = _p("narrow", {"scope": {"workloadTypes": ["Deployment"]}})
    wide = _p("wide", {"scope": {"workloadTypes": ["Deployment", "StatefulSet"]}},
              age_minutes=10)
    assert effective_policy([wide, narrow], W) == narrow


def test_older_wins_then_smaller_name() -> None:
    old, new = _p("zzz", age_minutes=10), _p("aaa")
    assert effective_policy([new, old], W) == old
    twin_a, twin_b = _p("alpha"), _p("beta")
    assert effective_policy([twin_b, twin_a], W) == twin_a


def test_non_matching_policies_are_not_candidates() -> None:
    other = _p("other", {"weight": 50, "scope": {"namespaceSelector": {
        "operator": "In", "values": ["batch"]}}})
    assert effective_policy([other], W) is None


_specs = st.fixed_dictionaries({
    "weight": st.integers(-3, 3),
    "enabled": st.booleans(),
    "scope": st.fixed_dictionaries({}, optional={
        "labelSelector": st.just({"matchLabels": {"tier": "web"}}),
        "namespaceSelector": st.sampled_from([
            {"operator": "In", "values": ["prod-eu"]}, {"operator": "In", "values": ["prod-*"]},
            {"operator": "NotIn", "values": ["dev"]}, {"operator": "In", "values": ["batch"]}]),
        "workloadTypes": st.sampled_from([["Deployment"], ["Deployment", "StatefulSet"],
                                          ["StatefulSet"]]),
    }),
})


@st.composite
def _policies(draw: st.DrawFn) -> list[Policy]:
    names = draw(st.lists(st.text("abcdef", min_size=1, max_size=4), min_size=1, max_size=8,
                          unique=True))
    return [_p(n, draw(_specs), draw(st.integers(0, 3))) for n in names]


@given(_policies(), st.randoms())
def test_result_is_independent_of_input_order(policies: list[Policy], rnd: Any) -> None:
    shuffled = list(policies)
    rnd.shuffle(shuffled)
    assert effective_policy(shuffled, W) == effective_policy(policies, W)


@given(_policies(), _specs, st.integers(0, 3))
def test_adding_a_lower_ranked_policy_never_changes_the_winner(
        policies: list[Policy], spec: dict[str, Any], age: int) -> None:
    winner = effective_policy(policies, W)
    extra = _p("zzzzz", spec, age)
    if winner is not None and rank(extra) > rank(winner):
        assert effective_policy([*policies, extra], W) == winner
