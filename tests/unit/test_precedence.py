"""Effective-policy resolution: type priority, weight, specificity, age within a kind, key;
the reference's selection examples as tables; order-independent (hypothesis)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.evaluation import Evaluation
from compaction.policy import Policy
from compaction.precedence import effective_policy, rank, select
from compaction.validation import parse_policy
from compaction.workload import Workload, WorkloadType

W = Workload(kind=WorkloadType.DEPLOYMENT, namespace="prod-eu", name="web",
             labels={"tier": "web"})
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def _p(name: str, spec: dict[str, Any] | None = None, age_minutes: int = 0,
       namespace: str = "") -> Policy:
    """A ClusterCompactionPolicy, or with ``namespace`` a CompactionPolicy there."""
    created = (T0 - datetime.timedelta(minutes=age_minutes)).isoformat()
    meta = {"name": name, "creationTimestamp": created}
    kind = "CompactionPolicy" if namespace else "ClusterCompactionPolicy"
    if namespace:
        meta["namespace"] = namespace
    return parse_policy({"kind": kind, "metadata": meta, "spec": spec or {}})


def _cp(name: str, weight: int = 0, age_minutes: int = 0) -> Policy:
    return _p(name, {"weight": weight}, age_minutes, namespace=W.namespace)


def _ccp(name: str, weight: int = 0, age_minutes: int = 0) -> Policy:
    return _p(name, {"weight": weight}, age_minutes)


def _priorities(**by_kind: int) -> Evaluation:
    return Evaluation(tuple(by_kind.items()), 1, True)


FAVOUR_NAMESPACES = _priorities(CompactionPolicy=100, ClusterCompactionPolicy=90)
EQUAL = _priorities(ClusterCompactionPolicy=80, CompactionPolicy=80)


# The reference's four selection examples and its "favor namespace policies" configuration,
# with the compaction kinds: (policies, the PolicyEvaluation, winner's key, the rule).
@pytest.mark.parametrize(("policies", "evaluation", "winner", "rule"), [
    pytest.param([_ccp("prod", 10), _cp("team", 100)], Evaluation(),
                 "ClusterCompactionPolicy/prod", "type priority 100 > 90",
                 id="1-default-precedence-type-beats-weight"),
    pytest.param([_cp("policy-a", 50), _cp("policy-b", 100)], Evaluation(),
                 "CompactionPolicy/prod-eu/policy-b", "weight 100 > 50",
                 id="2-same-type-higher-weight"),
    pytest.param([_ccp("prod", 50), _cp("team", 100)], EQUAL,
                 "CompactionPolicy/prod-eu/team", "weight 100 > 50",
                 id="3-equal-priority-weight-decides"),
    pytest.param([_cp("policy-b", 80, age_minutes=0), _cp("policy-a", 80, age_minutes=60)],
                 Evaluation(), "CompactionPolicy/prod-eu/policy-a", "older",
                 id="4-same-kind-equal-weight-older-wins"),
    pytest.param([_cp("aaa", 80, age_minutes=60), _p("zzz", {"weight": 80, "scope": {
        "namespaceSelector": {"operator": "In", "values": [W.namespace]}}})], EQUAL,
                 "ClusterCompactionPolicy/zzz",
                 "key ClusterCompactionPolicy/zzz < CompactionPolicy/prod-eu/aaa",
                 id="4-different-kinds-the-key-decides-not-age"),
    pytest.param([_ccp("prod", 100), _cp("team", 0)], FAVOUR_NAMESPACES,
                 "CompactionPolicy/prod-eu/team", "type priority 100 > 90",
                 id="favour-namespace-policies"),
])
def test_the_reference_selection_examples(policies: list[Policy], evaluation: Evaluation,
                                          winner: str, rule: str) -> None:
    for order in (policies, policies[::-1]):
        chosen = select(order, W, evaluation)
        assert chosen.winner is not None and chosen.winner.key == winner
        assert chosen.rule.startswith(rule), chosen.rule


def test_a_namespace_admin_cannot_win_by_weight_alone_under_the_defaults() -> None:
    winner = effective_policy([_ccp("prod", 0), _cp("team", 2**31 - 1)], W)
    assert winner is not None and winner.kind == "ClusterCompactionPolicy"


def test_a_type_the_evaluation_leaves_out_keeps_its_default_and_unknown_types_rank_nothing(
        ) -> None:
    partial = _priorities(CompactionPolicy=95, RollbackPolicy=1000)
    assert partial.priority("ClusterCompactionPolicy") == 100
    assert partial.unknown == ("RollbackPolicy",)
    winner = effective_policy([_ccp("prod"), _cp("team", 5)], W, partial)
    assert winner is not None and winner.kind == "ClusterCompactionPolicy"


def test_a_namespaced_policy_covers_its_own_namespace_only() -> None:
    other = Workload(kind=WorkloadType.DEPLOYMENT, namespace="batch", name="job")
    team = _cp("team")
    assert effective_policy([team], W) == team
    assert effective_policy([team], other) is None


def test_the_summary_names_winner_loser_and_rule() -> None:
    summary = select([_cp("team", 100), _ccp("prod")], W).summary()
    assert summary == ("ClusterCompactionPolicy/prod won over CompactionPolicy/prod-eu/team: "
                       "type priority 100 > 90")
    assert select([_ccp("prod")], W).summary() == (
        "ClusterCompactionPolicy/prod is the only matching policy")


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
    out = []
    for n in names:
        spec: dict[str, Any] = draw(_specs)
        if draw(st.booleans()):  # a CompactionPolicy in the workload's namespace
            spec["scope"].pop("namespaceSelector", None)
            out.append(_p(n, spec, draw(st.integers(0, 3)), namespace=W.namespace))
        else:
            out.append(_p(n, spec, draw(st.integers(0, 3))))
    return out


_evaluations = st.sampled_from([Evaluation(), EQUAL, FAVOUR_NAMESPACES])


@given(_policies(), st.randoms(), _evaluations)
def test_result_is_independent_of_input_order(policies: list[Policy], rnd: Any,
                                              evaluation: Evaluation) -> None:
    shuffled = list(policies)
    rnd.shuffle(shuffled)
    assert effective_policy(shuffled, W, evaluation) == effective_policy(
        policies, W, evaluation)


@given(_policies(), _evaluations)
def test_the_winner_beats_every_other_match_by_the_rule_it_names(
        policies: list[Policy], evaluation: Evaluation) -> None:
    chosen = select(policies, W, evaluation)
    if chosen.winner is None or chosen.runner_up is None:
        return
    assert rank(chosen.winner, evaluation) < rank(chosen.runner_up, evaluation)
    if chosen.rule.startswith("older"):  # age decides only within a kind
        assert chosen.winner.kind == chosen.runner_up.kind


@given(_policies(), _specs, st.integers(0, 3))
def test_adding_a_lower_ranked_policy_never_changes_the_winner(
        policies: list[Policy], spec: dict[str, Any], age: int) -> None:
    winner = effective_policy(policies, W)
    extra = _p("zzzzz", spec, age)
    if winner is not None and rank(extra) > rank(winner):
        assert effective_policy([*policies, extra], W) == winner
