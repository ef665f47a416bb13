"""LimitRange ``maxLimitRequestRatio`` as LimitRanger judges it: per container and for the
Pod's sum, a request left out counting as its limit; and a resource plan that would newly
break it blocked, one that keeps it applied."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from compaction.limit_range import (
    Container,
    LimitRange,
    parse_limit_range,
    pod_total,
    violations,
)
from compaction.quantity import parse_quantity
from compaction.resource_plan import BlockReason, TemplateContainer, compose
from compaction.static_policy import parse_static_policy
from compaction.workload import Workload, WorkloadType

WEB = Workload(WorkloadType.DEPLOYMENT, "shop", "web")


def _range(kind: str, **item: Any) -> LimitRange:
    return parse_limit_range({"metadata": {"namespace": "shop", "name": "ratio",
                                           "resourceVersion": "3"},
                              "spec": {"limits": [{"type": kind, **item}]}})


CONTAINER_CPU_2 = _range("Container", maxLimitRequestRatio={"cpu": "2"})
POD_CPU_2 = _range("Pod", maxLimitRequestRatio={"cpu": "2"})
CONTAINER_MEMORY_2 = _range("Container", maxLimitRequestRatio={"memory": 2})
# As the API server stores it: defaultRequest defaulted from default.
DEFAULTS = _range("Container", maxLimitRequestRatio={"cpu": "2"}, default={"cpu": "500m"},
                  defaultRequest={"cpu": "250m"})


def _c(name: str, requests: dict[str, str] | None = None,
       limits: dict[str, str] | None = None) -> Container:
    return Container(name, {k: parse_quantity(v) for k, v in (requests or {}).items()},
                     {k: parse_quantity(v) for k, v in (limits or {}).items()})


def test_the_ratio_is_read_from_the_limit_range() -> None:
    (item,) = CONTAINER_MEMORY_2.items
    assert item.max_ratio == {"memory": Fraction(2)}


@pytest.mark.parametrize(("containers", "limit_range", "found"), [
    ([_c("app", {"cpu": "1"}, {"cpu": "2"})], CONTAINER_CPU_2, set()),
    ([_c("app", {"cpu": "1"}, {"cpu": "2500m"})], CONTAINER_CPU_2,
     {"container app: cpu limit/request 2.5 above 2 (LimitRange ratio, type Container)"}),
    ([_c("app", None, {"cpu": "3"})], CONTAINER_CPU_2, set()),
    ([_c("app", {"cpu": "0"}, {"cpu": "1"})], CONTAINER_CPU_2,
     {"container app: cpu request unset or 0, limit/request at most 2 "
      "(LimitRange ratio, type Container)"}),
    ([_c("app", {"cpu": "1"})], CONTAINER_CPU_2,
     {"container app: cpu limit unset or 0, limit/request at most 2 "
      "(LimitRange ratio, type Container)"}),
    ([_c("app")], CONTAINER_CPU_2,
     {"container app: cpu request unset or 0, limit/request at most 2 "
      "(LimitRange ratio, type Container)"}),
    ([_c("app", {"memory": "512Mi"}, {"memory": "1Gi"})], CONTAINER_MEMORY_2, set()),
    ([_c("app", {"memory": "500Mi"}, {"memory": "1Gi"})], CONTAINER_MEMORY_2,
     {"container app: memory limit/request 2.048 above 2 (LimitRange ratio, type Container)"}),
    ([_c("app", {"cpu": "1"}, {"cpu": "2"}), _c("log")], POD_CPU_2, set()),
    ([_c("app", {"cpu": "1"}, {"cpu": "2"}), _c("log", None, {"cpu": "2"})], POD_CPU_2, set()),
    ([_c("app", {"cpu": "1"}, {"cpu": "2"}), _c("log", {"cpu": "1"}, {"cpu": "4"})],
     POD_CPU_2, {"the Pod: cpu limit/request 3 above 2 (LimitRange ratio, type Pod)"}),
    ([_c("app", {"cpu": "1"}), _c("log", None, {"cpu": "3"})], POD_CPU_2, set()),
    ([_c("app"), _c("log")], POD_CPU_2,
     {"the Pod: cpu request unset or 0, limit/request at most 2 (LimitRange ratio, type Pod)"}),
], ids=["container-at-the-ratio", "container-above", "container-request-defaults-to-limit",
        "container-request-zero", "container-limit-unset", "container-neither",
        "container-memory-at-the-ratio", "container-memory-above",
        "pod-a-container-without-cpu-adds-nothing", "pod-request-defaults-to-limit",
        "pod-sum-above", "pod-limit-unset-in-one-container-sums-the-others",
        "pod-no-container-sets-cpu"])
def test_violations_of_the_ratio(containers: list[Container], limit_range: LimitRange,
                                 found: set[str]) -> None:
    assert violations(containers, [limit_range]) == found


def _policy(containers: list[dict[str, Any]]) -> Any:
    return parse_static_policy({"kind": "ClusterStaticPolicy", "metadata": {
        "name": "sizes", "creationTimestamp": "2026-01-01T10:00:00Z"},
        "spec": {"containers": containers}})


APP = (TemplateContainer("app", {"cpu": "1"}, {"cpu": "2"}),
       TemplateContainer("log", {"cpu": "100m"}, {"cpu": "200m"}))
# Within a Pod-type ratio, a container may leave CPU unset: it adds nothing to the sums.
APP_AND_LOG = (TemplateContainer("app", {"cpu": "1"}, {"cpu": "2"}), TemplateContainer("log"))


@pytest.mark.parametrize(("template", "limit_range", "plan", "blocked"), [
    (APP, CONTAINER_CPU_2, [{"name": "app", "requests": {"cpu": "500m"}}],
     "container app: cpu limit/request 4 above 2 (LimitRange ratio, type Container)"),
    (APP, CONTAINER_CPU_2, [{"name": "app", "requests": {"cpu": "1500m"}}], None),
    (APP, CONTAINER_CPU_2, [{"name": "app", "limits": {"cpu": "3"}}],
     "container app: cpu limit/request 3 above 2 (LimitRange ratio, type Container)"),
    (APP, CONTAINER_CPU_2, [{"name": "*", "requests": {"cpu": "2"}, "limits": {"cpu": "4"}}],
     None),
    ((TemplateContainer("app", {}, {"cpu": "1"}),), DEFAULTS,
     [{"name": "app", "limits": {"cpu": "2"}}], None),
    ((TemplateContainer("app"),), DEFAULTS, [{"name": "app", "limits": {"cpu": "1"}}],
     "container app: cpu limit/request 4 above 2 (LimitRange ratio, type Container)"),
    (APP_AND_LOG, POD_CPU_2, [{"name": "app", "requests": {"cpu": "500m"}}],
     "the Pod: cpu limit/request 4 above 2 (LimitRange ratio, type Pod)"),
    (APP_AND_LOG, POD_CPU_2, [{"name": "app", "requests": {"cpu": "1500m"}}], None),
    (APP_AND_LOG, POD_CPU_2, [{"name": "log", "limits": {"cpu": "3"}}], None),
    (APP_AND_LOG, POD_CPU_2,
     [{"name": "log", "requests": {"cpu": "500m"}, "limits": {"cpu": "4"}}],
     "the Pod: cpu limit/request 4 above 2 (LimitRange ratio, type Pod)"),
], ids=["container-request-lowered-breaks", "container-request-raised-keeps",
        "container-limit-raised-breaks", "container-both-within-keeps",
        "container-template-limit-is-the-request-not-defaultRequest",
        "container-defaultRequest-under-a-planned-limit-breaks",
        "pod-request-lowered-breaks", "pod-request-raised-keeps",
        "pod-limit-alone-is-also-the-request", "pod-second-container-breaks-the-sum"])
def test_a_plan_that_would_break_the_ratio_is_blocked_and_one_that_keeps_it_applies(
        template: tuple[TemplateContainer, ...], limit_range: LimitRange,
        plan: list[dict[str, Any]], blocked: str | None) -> None:
    result = compose([_policy(plan)], WEB, template, limit_ranges=[limit_range])
    if blocked is None:
        assert result.blocked is None and result.plan is not None
        assert result.plan.limit_ranges  # checked against "ratio"@3
        return
    assert result.plan is None and result.blocked is not None
    assert result.blocked.reason is BlockReason.LIMIT_RANGE
    assert result.blocked.message == f"{blocked} (plan of ClusterStaticPolicy/sizes)"


def test_a_ratio_the_template_already_breaks_does_not_block_a_plan_leaving_it_alone() -> None:
    template = (TemplateContainer("app", {"cpu": "1"}, {"cpu": "4"}),
                TemplateContainer("log", {"cpu": "100m"}, {"cpu": "200m"}))
    result = compose([_policy([{"name": "log", "requests": {"memory": "64Mi"}}])], WEB,
                     template, limit_ranges=[CONTAINER_CPU_2])
    assert result.blocked is None and result.plan is not None


POD_CPU_4 = _range("Pod", maxLimitRequestRatio={"cpu": "4"})


def _i(name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
       sidecar: bool = False) -> Container:
    c = _c(name, requests, limits)
    return Container(c.name, c.requests, c.limits, sidecar)


@pytest.mark.parametrize(("inits", "requests", "limits"), [
    pytest.param([], {"cpu": "1"}, {"cpu": "2"}, id="no-init-containers"),
    pytest.param([_i("setup", {"cpu": "3"}, {"cpu": "3"})], {"cpu": "3"}, {"cpu": "3"},
                 id="a-larger-init-container-sets-the-minimum"),
    pytest.param([_i("setup", {"cpu": "100m"}, {"cpu": "100m"})], {"cpu": "1"}, {"cpu": "2"},
                 id="a-smaller-one-changes-nothing"),
    pytest.param([_i("proxy", {"cpu": "200m"}, {"cpu": "400m"}, sidecar=True)],
                 {"cpu": "1200m"}, {"cpu": "2400m"}, id="a-sidecar-adds-to-the-sum"),
    pytest.param([_i("proxy", {"cpu": "500m"}, {"cpu": "500m"}, sidecar=True),
                  _i("setup", {"cpu": "1"}, {"cpu": "3"})],
                 {"cpu": "1500m"}, {"cpu": "3500m"},
                 id="an-init-container-after-a-sidecar-runs-beside-it"),
    pytest.param([_i("setup", {"memory": "1Gi"})], {"cpu": "1", "memory": "1Gi"},
                 {"cpu": "2"}, id="a-resource-only-an-init-container-sets"),
])
def test_the_pod_totals_count_init_containers_as_limitranger_does(
        inits: list[Container], requests: dict[str, str], limits: dict[str, str]) -> None:
    app = [_c("app", {"cpu": "1"}, {"cpu": "2"})]
    assert pod_total(app, inits, "requests") == {
        k: parse_quantity(v) for k, v in requests.items()}
    assert pod_total(app, inits, "limits") == {k: parse_quantity(v) for k, v in limits.items()}


def test_an_init_container_that_makes_the_pods_ratio_blocks_a_plan_the_sum_alone_allows(
        ) -> None:
    # The Pod: limits max(1, 2) = 2 CPUs, requests max(500m, 100m): ratio 4, at the limit.
    # Lowering the app's request to 400m keeps the containers' own 1/0.4 = 2.5, but the API
    # server's 2/0.4 = 5 refuses every new Pod.
    template = (TemplateContainer("app", {"cpu": "500m"}, {"cpu": "1"}),)
    setup = (TemplateContainer("setup", {"cpu": "100m"}, {"cpu": "2"}),)
    plan = [{"name": "app", "requests": {"cpu": "400m"}}]
    assert compose([_policy(plan)], WEB, template, limit_ranges=[POD_CPU_4]).plan is not None
    result = compose([_policy(plan)], WEB, template, limit_ranges=[POD_CPU_4],
                     init_containers=setup)
    assert result.plan is None and result.blocked is not None
    assert result.blocked.message == ("the Pod: cpu limit/request 5 above 4 (LimitRange "
                                      "ratio, type Pod) (plan of ClusterStaticPolicy/sizes)")
    kept = compose([_policy([{"name": "app", "requests": {"cpu": "600m"}}])], WEB, template,
                   limit_ranges=[POD_CPU_4], init_containers=setup)
    assert kept.blocked is None and kept.plan is not None
