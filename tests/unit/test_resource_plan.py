"""Composing static policies per (container, requests|limits, resource), from the rules of the
reference's PolicyEvaluation document, and checking the combined plan."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.evaluation import Evaluation
from compaction.limit_range import parse_limit_range
from compaction.problem import InvalidPolicy
from compaction.resource_plan import (
    BlockReason,
    ResourcePlan,
    TemplateContainer,
    compose,
    parse_resource_plan,
)
from compaction.static_policy import (
    ContainerResources,
    parse_static_policy,
    validate_static_policy,
)
from compaction.workload import Workload, WorkloadType

WEB = Workload(WorkloadType.DEPLOYMENT, "shop", "web")
TWO = (TemplateContainer("app"), TemplateContainer("sidecar"))
EARLY = "2026-01-01T10:00:00Z"
LATE = "2026-01-01T11:00:00Z"


def _policy(name: str, containers: list[dict[str, Any]], weight: int = 0,
            namespace: str | None = None, created: str = EARLY,
            scope: dict[str, Any] | None = None) -> Any:
    kind = "StaticPolicy" if namespace else "ClusterStaticPolicy"
    meta: dict[str, Any] = {"name": name, "creationTimestamp": created}
    if namespace:
        meta["namespace"] = namespace
    return parse_static_policy({"kind": kind, "metadata": meta, "spec": {
        "weight": weight, "containers": containers, **({"scope": scope} if scope else {})}})


def _values(result: Any) -> dict[tuple[str, str, str], tuple[str, str]]:
    return {(c.container, c.field, c.resource): (c.value, c.policy) for c in result.choices}


def test_a_two_container_workload_takes_cpu_from_one_policy_and_memory_from_another() -> None:
    cpu = _policy("cpu", [{"name": "*", "requests": {"cpu": "250m"}}], weight=10)
    memory = _policy("memory", [{"name": "app", "requests": {"memory": "256Mi", "cpu": "1"}}])
    result = compose([cpu, memory], WEB, TWO)
    assert result.blocked is None and result.plan is not None
    assert _values(result) == {
        ("app", "requests", "cpu"): ("250m", "ClusterStaticPolicy/cpu"),  # weight 10 > 0
        ("app", "requests", "memory"): ("256Mi", "ClusterStaticPolicy/memory"),
        ("sidecar", "requests", "cpu"): ("250m", "ClusterStaticPolicy/cpu"),
    }
    assert result.plan.containers["app"] == ContainerResources(
        "app", {"cpu": "250m", "memory": "256Mi"}, {})


@pytest.mark.parametrize(("policies", "expected"), [
    # The exact container name beats "*" once priority and weight are equal...
    ([("star", "*", 0, None, EARLY), ("exact", "app", 0, None, LATE)], "ClusterStaticPolicy/exact"),
    # ...but never a higher weight.
    ([("star", "*", 5, None, EARLY), ("exact", "app", 0, None, EARLY)], "ClusterStaticPolicy/star"),
    # Same kind, all else equal: the older policy.
    ([("b-old", "app", 0, None, EARLY), ("a-new", "app", 0, None, LATE)],
     "ClusterStaticPolicy/b-old"),
    # Different kinds at equal priority (90 both) and weight: age is not compared, the key is.
    ([("zz", "app", 0, None, EARLY), ("aa", "app", 0, "shop", LATE)],
     "ClusterStaticPolicy/zz"),
    ([("aa", "app", 0, "shop", EARLY), ("zz", "app", 0, None, LATE)],
     "ClusterStaticPolicy/zz"),
], ids=["exact-over-star", "weight-over-exact", "same-kind-age", "cross-kind-key",
        "cross-kind-key-age-ignored"])
def test_the_documents_order_picks_each_value(
        policies: list[tuple[str, str, int, str | None, str]], expected: str) -> None:
    made = [_policy(n, [{"name": c, "requests": {"cpu": "1"}}], w, ns, created)
            for n, c, w, ns, created in policies]
    (choice,) = compose(made, WEB, (TemplateContainer("app"),)).choices
    assert choice.policy == expected


def test_type_priority_from_the_policy_evaluation_decides_before_weight() -> None:
    cluster = _policy("c", [{"name": "app", "requests": {"cpu": "1"}}], weight=100)
    local = _policy("l", [{"name": "app", "requests": {"cpu": "2"}}], namespace="shop")
    favour = Evaluation((("StaticPolicy", 120), ("ClusterStaticPolicy", 90)), 1, True)
    (choice,) = compose([cluster, local], WEB, (TemplateContainer("app"),), favour).choices
    assert choice.policy == "StaticPolicy/shop/l"
    (default,) = compose([cluster, local], WEB, (TemplateContainer("app"),)).choices
    assert default.policy == "ClusterStaticPolicy/c"  # 90 = 90: weight 100 decides


def test_a_request_above_its_limit_blocks_the_whole_plan_naming_policies_and_values() -> None:
    requests = _policy("big", [{"name": "app", "requests": {"cpu": "2", "memory": "1Gi"}}])
    limits = _policy("small", [{"name": "*", "limits": {"cpu": "1"}}])
    result = compose([requests, limits], WEB, (TemplateContainer("app"),))
    assert result.plan is None and result.blocked is not None
    assert result.blocked.reason is BlockReason.REQUEST_ABOVE_LIMIT
    assert result.blocked.message == ("container app: cpu request 2 above limit 1 (from "
                                      "ClusterStaticPolicy/big, ClusterStaticPolicy/small)")
    assert result.blocked.policies == ("ClusterStaticPolicy/big", "ClusterStaticPolicy/small")


def test_the_pod_templates_own_limit_counts_in_the_check() -> None:
    raise_request = _policy("up", [{"name": "app", "requests": {"memory": "2Gi"}}])
    template = (TemplateContainer("app", {"memory": "512Mi"}, {"memory": "1Gi"}),)
    blocked = compose([raise_request], WEB, template).blocked
    assert blocked is not None and "memory request" in blocked.message


def test_extended_resources_from_two_policies_must_agree() -> None:
    a = _policy("a", [{"name": "app", "requests": {"nvidia.com/gpu": "1"},
                       "limits": {"nvidia.com/gpu": "1"}}], weight=5)
    b = _policy("b", [{"name": "app", "limits": {"nvidia.com/gpu": "2"}}], weight=9)
    blocked = compose([a, b], WEB, (TemplateContainer("app"),)).blocked
    assert blocked is not None and blocked.reason is BlockReason.EXTENDED_UNEQUAL


def test_a_limit_range_the_plan_would_break_blocks_it_and_one_already_broken_does_not() -> None:
    limit_range = parse_limit_range({"metadata": {"namespace": "shop", "name": "caps",
                                                  "resourceVersion": "7"},
                                     "spec": {"limits": [{"type": "Container",
                                                          "max": {"cpu": "1"},
                                                          "default": {"cpu": "1"},
                                                          "defaultRequest": {"cpu": "500m"}}]}})
    too_big = _policy("big", [{"name": "app", "limits": {"cpu": "2"}, "requests": {"cpu": "2"}}])
    blocked = compose([too_big], WEB, (TemplateContainer("app"),), limit_ranges=[limit_range])
    assert blocked.blocked is not None and blocked.blocked.reason is BlockReason.LIMIT_RANGE
    assert "cpu limit 2 above maximum 1 (LimitRange caps, type Container)" in \
        blocked.blocked.message
    fits = _policy("fits", [{"name": "app", "requests": {"cpu": "800m"}}])
    result = compose([fits], WEB, (TemplateContainer("app"),), limit_ranges=[limit_range])
    assert result.plan is not None and result.plan.limit_ranges  # checked against "caps"@7
    # A request above the LimitRange's defaulted limit is caught too.
    above = _policy("above", [{"name": "app", "requests": {"cpu": "1500m"}}])
    assert compose([above], WEB, (TemplateContainer("app"),),
                   limit_ranges=[limit_range]).blocked is not None


def test_nothing_applies_to_an_opted_out_workload_or_out_of_scope() -> None:
    p = _policy("p", [{"name": "*", "requests": {"cpu": "1"}}],
                scope={"namespaceSelector": {"operator": "In", "values": ["shop"]}})
    ignored = Workload(WorkloadType.DEPLOYMENT, "shop", "web",
                       labels={"compactor.dev/ignore": "true"})
    assert compose([p], ignored, TWO).choices == ()
    elsewhere = Workload(WorkloadType.DEPLOYMENT, "other", "web")
    assert compose([p], elsewhere, TWO).choices == ()
    local = _policy("l", [{"name": "*", "requests": {"cpu": "1"}}], namespace="other")
    assert compose([local], WEB, TWO).choices == ()


@pytest.mark.parametrize(("spec", "says"), [
    ({"containers": [{"name": "app", "requests": {"cpu": "lots"}}]}, "is not a quantity"),
    ({"containers": [{"name": "app", "requests": {"nvidia.com/gpu": "1"}}]},
     "must equal the request 1"),
    ({"containers": [{"name": "app", "requests": {"cpu": "1"}},
                     {"name": "app", "limits": {"cpu": "1"}}]}, "is listed twice"),
    ({"containers": []}, "non-empty list"),
    ({"containers": [{"name": "app"}]}, "sets neither requests nor limits"),
    ({"containers": [{"name": "app", "requests": {"cpu": "-1"}}]}, "must not be negative"),
    ({"containers": [{"name": "app", "requests": {"bad name!": "1"}}]}, "not a resource name"),
])
def test_invalid_static_policies_are_refused_with_the_field(spec: dict[str, Any],
                                                            says: str) -> None:
    problems = validate_static_policy({"kind": "ClusterStaticPolicy",
                                       "metadata": {"name": "p"}, "spec": spec})
    assert any(says in p.message for p in problems), problems


def test_a_namespaced_static_policy_may_not_select_namespaces() -> None:
    with pytest.raises(InvalidPolicy) as e:
        parse_static_policy({"kind": "StaticPolicy", "metadata": {"name": "p", "namespace": "a"},
                             "spec": {"scope": {"namespaceSelector": {"operator": "In",
                                                                      "values": ["b"]}},
                                      "containers": [{"name": "*", "limits": {"cpu": "1"}}]}})
    assert "spec.scope.namespaceSelector" in str(e.value)


def test_integer_quantities_are_read_as_written() -> None:
    p = parse_static_policy({"metadata": {"name": "gpu"}, "spec": {"containers": [
        {"name": "*", "requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 1}}]}})
    assert p.containers[0].requests == {"nvidia.com/gpu": "1"}
    assert p.creation_timestamp is None and p.kind == "ClusterStaticPolicy"


_QUANTITY = st.sampled_from(["100m", "250m", "1", "2", "512Mi", "1Gi", "1.5", "3e2"])
_RESOURCES = st.dictionaries(st.sampled_from(["cpu", "memory", "example.com/dongle"]),
                             _QUANTITY, max_size=3)
_PLANS = st.builds(
    lambda entries, ranges: ResourcePlan(
        {n: ContainerResources(n, r, lim) for n, (r, lim) in entries.items()}, ranges),
    st.dictionaries(st.text("abcdefgh-", min_size=1, max_size=8),
                    st.tuples(_RESOURCES, _RESOURCES), max_size=4),
    st.sampled_from(["", "0123456789ab"]))


@given(_PLANS)
def test_a_rendered_plan_parses_back_to_itself(plan: ResourcePlan) -> None:
    parsed = parse_resource_plan(plan.rendered)
    assert parsed.error is None and parsed.plan is not None
    assert parsed.plan.rendered == plan.rendered and parsed.plan.hash == plan.hash


@given(_PLANS, st.integers(0, 200))
def test_a_tampered_plan_is_refused_never_applied(plan: ResourcePlan, at: int) -> None:
    text = plan.rendered
    i = at % len(text)
    tampered = text[:i] + ("x" if text[i] != "x" else "y") + text[i + 1:]
    parsed = parse_resource_plan(tampered)
    assert parsed.plan is None or parsed.plan.rendered == text
