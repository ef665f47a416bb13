"""The resource part of a Pod's patch: it applies (RFC 6902, with jsonpatch) to any Pod shape,
sets exactly what the plan says, never yields a Pod the API server would refuse, and never
reaches a placeholder. The whole patch is the intent's then the plan's, on any Pod shape."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.intent import Intent
from compaction.quantity import parse_quantity
from compaction.resource_plan import ResourcePlan
from compaction.static_policy import ContainerResources
from tests.unit.webhook_fakes import DEPLOY, RS, FakeApi, pod, review
from webhook import patch as patch_module
from webhook.admission import Admitter, Outcome
from webhook.metrics import Metrics
from webhook.owners import OwnerCache
from webhook.patch import PatchPlan, build_patch, build_pod_patch, resource_patch
from webhook.review import pod_view

_QUANTITY = st.sampled_from(["100m", "250m", "500m", "1", "2", "64Mi", "1Gi", "3"])
_NAMES = st.sampled_from(["app", "sidecar", "log"])
_RESOURCES = st.dictionaries(st.sampled_from(["cpu", "memory", "example.com/dongle"]),
                             _QUANTITY, max_size=3)


def _container(name: str, resources: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "pause"}
    if resources is not None:
        c["resources"] = copy.deepcopy(resources)  # never one map shared by two containers
    return c


_RESOURCE_FIELD: st.SearchStrategy[dict[str, Any] | None] = st.one_of(
    st.none(), st.just({}),
    st.fixed_dictionaries({}, optional={"requests": _RESOURCES, "limits": _RESOURCES}))
_PODS = st.builds(
    lambda containers, annotations: {
        "metadata": {"generateName": "p-", **({"annotations": annotations}
                                               if annotations is not None else {})},
        "spec": {"containers": [_container(n, r) for n, r in containers]}},
    st.lists(st.tuples(_NAMES, _RESOURCE_FIELD), min_size=1, max_size=3,
             unique_by=lambda t: t[0]),
    st.one_of(st.none(), st.just({}), st.just({"a": "b"})))
_PLANS = st.builds(lambda entries: ResourcePlan(
    {n: ContainerResources(n, r, lim) for n, (r, lim) in entries.items()}),
    st.dictionaries(_NAMES, st.tuples(_RESOURCES, _RESOURCES), min_size=1, max_size=3))


def _view(pod: dict[str, Any]) -> Any:
    return pod_view({"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                     "operation": "CREATE", "namespace": "shop", "object": pod})


def _refusable(container: dict[str, Any]) -> bool:
    res = container.get("resources") or {}
    requests = {k: parse_quantity(v) for k, v in (res.get("requests") or {}).items()}
    limits = {k: parse_quantity(v) for k, v in (res.get("limits") or {}).items()}
    requests = {**limits, **requests}
    return any((k == "example.com/dongle" and limits.get(k) != v) or
               (k in limits and v > limits[k]) for k, v in requests.items())


@given(_PODS, _PLANS)
def test_the_resource_patch_applies_and_sets_what_the_plan_says_or_nothing(
        pod: dict[str, Any], plan: ResourcePlan) -> None:
    view = _view(pod)
    result = resource_patch(view, plan, "", view.has_annotations)
    patched = jsonpatch.apply_patch(copy.deepcopy(pod), result.ops)
    if result.outcome == "conflict":
        assert result.ops == [] and patched == pod
        return
    assert result.outcome in ("applied", "unchanged")
    assert patched["metadata"]["annotations"]["compactor.dev/resources-hash"] == plan.hash
    for c in patched["spec"]["containers"]:
        wanted = plan.containers.get(c["name"])
        if wanted is None:
            assert c == next(o for o in pod["spec"]["containers"] if o["name"] == c["name"])
            continue
        res = c.get("resources") or {}
        for which in ("requests", "limits"):
            for resource, value in wanted.values(which).items():
                assert res[which][resource] == value
        assert not _refusable(c)


def test_a_plan_checked_against_other_limit_ranges_is_left_out() -> None:
    pod = {"metadata": {}, "spec": {"containers": [_container("app", None)]}}
    plan = ResourcePlan({"app": ContainerResources("app", {"cpu": "1"})}, "0123456789ab")
    assert resource_patch(_view(pod), plan, "", False).outcome == "limit_ranges_changed"
    assert resource_patch(_view(pod), plan, None, False).outcome == "limit_ranges_unknown"
    applied = resource_patch(_view(pod), plan, "0123456789ab", False)
    assert applied.outcome == "applied" and applied.ops[0] == {
        "op": "add", "path": "/spec/containers/0/resources", "value": {"requests": {"cpu": "1"}}}


def test_a_request_above_the_pods_own_limit_is_not_patched_in() -> None:
    pod = {"metadata": {}, "spec": {"containers": [
        _container("app", {"limits": {"cpu": "500m"}})]}}
    plan = ResourcePlan({"app": ContainerResources("app", {"cpu": "1"})})
    assert resource_patch(_view(pod), plan, "", False).outcome == "conflict"


def test_extended_resource_names_are_escaped_in_the_pointer() -> None:
    pod = {"metadata": {"annotations": {}}, "spec": {"containers": [
        _container("app", {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}})]}}
    plan = ResourcePlan({"app": ContainerResources("app", {"nvidia.com/gpu": "1"},
                                                   {"nvidia.com/gpu": "1"})})
    ops = resource_patch(_view(pod), plan, "", True).ops
    assert {"op": "add", "path": "/spec/containers/0/resources/requests/nvidia.com~1gpu",
            "value": "1"} in ops
    patched = jsonpatch.apply_patch(pod, ops)
    assert patched["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"


@pytest.mark.parametrize(("priority", "resized"), [
    (-10, False), (-11, False), (-9, True), (None, True),
], ids=["placeholder-minus-10", "placeholder-minus-11", "minus-9", "no-priority"])
@pytest.mark.asyncio
async def test_a_placeholder_of_a_workload_with_a_plan_gets_no_resource_patch(
        priority: int | None, resized: bool) -> None:
    plan = ResourcePlan({"c": ContainerResources("c", {"cpu": "250m"}, {"memory": "64Mi"})})
    api = FakeApi()
    api.add_namespace("shop")
    api.add("shop", DEPLOY, {"compactor.dev/resources": plan.rendered})
    api.add("shop", RS, parent=DEPLOY)
    metrics = Metrics()
    admitter = Admitter(OwnerCache(api.get, metrics), metrics, limit_ranges=lambda _: "")
    obj = pod()
    if priority is not None:
        obj["spec"]["priority"] = priority
    decision = await admitter.decide(orjson.loads(review(obj))["request"])
    patched = jsonpatch.apply_patch(copy.deepcopy(obj), decision.patch or [])
    if not resized:
        assert (decision.outcome, decision.reason) == (Outcome.SKIPPED, "placeholder priority")
        assert patched == obj
        return
    assert decision.outcome is Outcome.PATCHED
    assert patched["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "250m"}, "limits": {"memory": "64Mi"}}
    assert patched["metadata"]["annotations"]["compactor.dev/resources-hash"] == plan.hash


def test_quantities_are_parsed_once_within_a_bound_and_answer_as_parse_quantity() -> None:
    memo = patch_module._memo_quantity
    memo.cache_clear()
    texts = [f"{i}Mi" for i in range(3000)] + [f"{i}m" for i in range(3000)]
    for text in texts + texts[:10]:
        assert patch_module._quantity(text) == parse_quantity(text)
    info = memo.cache_info()
    assert info.maxsize == 1024 and info.currsize == 1024
    long = "1" * 40  # longer than any real quantity: parsed, never held
    before = memo.cache_info().currsize
    assert patch_module._quantity(long) == parse_quantity(long)
    assert memo.cache_info().currsize == before
    for _ in range(2):  # a text that does not parse is refused every time, never remembered
        with pytest.raises(ValueError):
            patch_module._quantity("12 cores")


def test_the_plan_hash_is_computed_once_per_plan_and_set_on_every_pod() -> None:
    pod = {"metadata": {}, "spec": {"containers": [_container("app", None)]}}
    plan = ResourcePlan({"app": ContainerResources("app", {"cpu": "1"})})
    first = resource_patch(_view(pod), plan, "", False)
    assert "hash" in plan.__dict__  # held by the plan from now on
    assert resource_patch(_view(pod), plan, "", False) == first
    (stamp,) = [o for o in first.ops if o["path"] == "/metadata/annotations"]
    assert stamp["value"] == {"compactor.dev/resources-hash": plan.hash}
    assert plan.hash == ResourcePlan({"app": ContainerResources("app", {"cpu": "1"})}).hash


_INTENTS = st.sampled_from([
    None, Intent("p", {"compactor.dev/policy": "p"}, "compactor-scheduler"),
    Intent("d", {"compactor.dev/policy": "d"}, None)])


# Pods without annotations, an intent and a plan that applies are a few in a hundred: more
# examples than the default, so that case is met on every run.
@settings(max_examples=400)
@given(_PODS, st.one_of(st.none(), _PLANS), _INTENTS, st.sampled_from([None, "", "0ab"]),
       st.sampled_from([None, "kai-scheduler", "default-scheduler"]),
       st.sampled_from([None, {}, {"compactor.dev/policy": "old"}]))
def test_the_pod_patch_is_the_intent_patch_then_the_resource_patch(
        pod: dict[str, Any], plan: ResourcePlan | None, intent: Intent | None,
        limit_ranges: str | None, scheduler: str | None, labels: dict[str, str] | None) -> None:
    if labels is not None:
        pod["metadata"]["labels"] = dict(labels)
    if scheduler is not None:
        pod["spec"]["schedulerName"] = scheduler
    view = _view(pod)
    rendered = intent.render() if intent is not None else None
    result = build_pod_patch(view, intent, rendered, plan, limit_ranges)

    first = (build_patch(view, intent, intent.render()) if intent is not None
             else PatchPlan([]))
    annotations = view.has_annotations or any(
        o["path"] == "/metadata/annotations" for o in first.ops)
    second = (resource_patch(view, plan, limit_ranges, annotations) if plan is not None
              else None)
    assert result.ops == first.ops + (second.ops if second is not None else [])
    assert result.kept_scheduler == first.kept_scheduler
    assert result.resources == (second.outcome if second is not None else None)

    patched = jsonpatch.apply_patch(copy.deepcopy(pod), result.ops)
    marks = patched["metadata"].get("annotations") or {}
    assert marks.get("compactor.dev/intent") == rendered
    if plan is not None and result.resources in ("applied", "unchanged"):
        assert marks["compactor.dev/resources-hash"] == plan.hash
    else:
        assert marks.get("compactor.dev/resources-hash") is None
