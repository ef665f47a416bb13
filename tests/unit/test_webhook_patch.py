"""build_patch: the JSONPatch for labels, the intent marker and schedulerName; build_pod_patch:
that patch and the resource plan's together. Pure."""

from __future__ import annotations

from typing import Any

import pytest

from compaction.intent import Intent
from compaction.resource_plan import ResourcePlan
from compaction.static_policy import ContainerResources
from webhook.patch import build_patch, build_pod_patch, escape
from webhook.review import PodView

INTENT = Intent("p", {"compactor.dev/policy": "p"}, "compactor-scheduler")
TEXT = INTENT.render()


def _pod(**kw: Any) -> PodView:
    return PodView(namespace="ns", name="x", **kw)


def test_escape_follows_rfc6901() -> None:
    assert escape("compactor.dev/policy") == "compactor.dev~1policy"
    assert escape("a~b/c") == "a~0b~1c"


def test_pod_without_labels_or_annotations_gets_both_maps_created() -> None:
    ops = build_patch(_pod(), INTENT, TEXT).ops
    assert ops == [
        {"op": "add", "path": "/metadata/labels", "value": {"compactor.dev/policy": "p"}},
        {"op": "add", "path": "/metadata/annotations", "value": {"compactor.dev/intent": TEXT}},
        {"op": "add", "path": "/spec/schedulerName", "value": "compactor-scheduler"},
    ]


def test_existing_maps_get_one_escaped_key_each() -> None:
    pod = _pod(labels={"app": "web"}, annotations={"a": "b"}, has_labels=True,
               has_annotations=True, scheduler_name="default-scheduler")
    assert build_patch(pod, INTENT, TEXT).ops == [
        {"op": "add", "path": "/metadata/labels/compactor.dev~1policy", "value": "p"},
        {"op": "add", "path": "/metadata/annotations/compactor.dev~1intent", "value": TEXT},
        {"op": "replace", "path": "/spec/schedulerName", "value": "compactor-scheduler"},
    ]


def test_a_stale_policy_label_is_replaced() -> None:
    pod = _pod(labels={"compactor.dev/policy": "old"}, has_labels=True)
    ops = build_patch(pod, INTENT, TEXT).ops
    assert ops[0] == {"op": "replace", "path": "/metadata/labels/compactor.dev~1policy",
                      "value": "p"}


@pytest.mark.parametrize(("scheduler", "exempt", "kept"), [
    ("kai-scheduler", frozenset({"kai-scheduler"}), True),
    ("volcano", frozenset({"kai-scheduler"}), False),
    ("volcano", frozenset({"kai-scheduler", "volcano"}), True),
    ("kai-scheduler", frozenset(), False),
])
def test_only_an_exempt_scheduler_is_kept(scheduler: str, exempt: frozenset[str],
                                          kept: bool) -> None:
    plan = build_patch(_pod(scheduler_name=scheduler), INTENT, TEXT, exempt)
    replaced = {"op": "replace", "path": "/spec/schedulerName",
                "value": INTENT.scheduler_name} in plan.ops
    assert replaced is not kept
    assert plan.kept_scheduler == (scheduler if kept else None)


def test_gpu_scheduler_is_kept_and_reported() -> None:
    plan = build_patch(_pod(scheduler_name="kai-scheduler"), INTENT, TEXT)
    assert plan.kept_scheduler == "kai-scheduler"
    assert not any(op["path"] == "/spec/schedulerName" for op in plan.ops)


def test_descheduler_only_intent_leaves_the_scheduler_alone() -> None:
    intent = Intent("d", {"compactor.dev/policy": "d"}, None)
    plan = build_patch(_pod(), intent, intent.render())
    assert [op["path"] for op in plan.ops] == ["/metadata/labels", "/metadata/annotations"]
    assert plan.kept_scheduler is None


def test_reinvocation_on_a_compliant_pod_yields_an_empty_patch() -> None:
    pod = _pod(labels={"compactor.dev/policy": "p", "app": "x"},
               annotations={"compactor.dev/intent": TEXT}, has_labels=True,
               has_annotations=True, scheduler_name="compactor-scheduler")
    plan = build_patch(pod, INTENT, TEXT)
    assert plan.ops == [] and plan.kept_scheduler is None


PLAN = ResourcePlan({"c": ContainerResources("c", {"cpu": "250m"})})
CONTAINERS = [{"name": "c", "image": "pause"}]
HASH = "compactor.dev~1resources-hash"


@pytest.mark.parametrize(("annotations", "intent", "plan", "limit_ranges", "paths", "outcome"), [
    (None, INTENT, PLAN, "",
     ["/metadata/labels", "/metadata/annotations", "/spec/schedulerName",
      "/spec/containers/0/resources", f"/metadata/annotations/{HASH}"], "applied"),
    (None, None, PLAN, "",
     ["/spec/containers/0/resources", "/metadata/annotations"], "applied"),
    ({"a": "b"}, INTENT, PLAN, "",
     ["/metadata/labels", "/metadata/annotations/compactor.dev~1intent", "/spec/schedulerName",
      "/spec/containers/0/resources", f"/metadata/annotations/{HASH}"], "applied"),
    (None, INTENT, PLAN, None,
     ["/metadata/labels", "/metadata/annotations", "/spec/schedulerName"],
     "limit_ranges_unknown"),
    (None, INTENT, PLAN, "other",
     ["/metadata/labels", "/metadata/annotations", "/spec/schedulerName"],
     "limit_ranges_changed"),
    (None, INTENT, None, "",
     ["/metadata/labels", "/metadata/annotations", "/spec/schedulerName"], None),
    (None, None, None, "", [], None),
], ids=["intent-creates-the-map-the-hash-goes-into", "plan-alone-creates-the-map",
        "existing-map-gets-both-keys", "limit-ranges-unknown-intent-only",
        "limit-ranges-changed-intent-only", "no-plan", "neither"])
def test_the_pod_patch_puts_the_plan_after_the_intent_on_one_annotation_map(
        annotations: dict[str, str] | None, intent: Intent | None, plan: ResourcePlan | None,
        limit_ranges: str | None, paths: list[str], outcome: str | None) -> None:
    pod = _pod(annotations=annotations or {}, has_annotations=annotations is not None,
               spec_containers=CONTAINERS)
    result = build_pod_patch(pod, intent, intent.render() if intent else None, plan,
                             limit_ranges)
    assert [op["path"] for op in result.ops] == paths
    assert result.resources == outcome
    assert result.kept_scheduler is None
