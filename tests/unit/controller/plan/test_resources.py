"""A pass with resource policies, as table tests: the plan written on the workload (beside the
compaction intent, never competing with it), a blocked plan's Event and metric count, and
the resource policies' status (``plan`` is pure)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from compaction.resource_plan import parse_resource_plan
from compaction.workload import WorkloadType
from controller.components.pod_settings import RuntimeSettings
from controller.plan.actions import Patch, Plan, RecordEvent, WriteStatus
from controller.plan.between_passes import Memory
from controller.plan.decide import plan
from controller.plan.settings import PlanSettings
from controller.snapshot.node import NodeInfo
from controller.snapshot.pod import PodInfo
from controller.snapshot.policies import parse_policy_info, parse_static_policy_info
from controller.snapshot.snapshot import Snapshot
from controller.snapshot.workload import WorkloadInfo, parse_workload

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
SETTINGS = PlanSettings(RuntimeSettings(), default_evaluation=False)
RESOURCES = "compactor.dev/resources"


def _static(name: str, containers: list[dict[str, Any]], namespace: str = "",
            weight: int = 0) -> Any:
    meta: dict[str, Any] = {"name": name, "generation": 2,
                            "creationTimestamp": "2026-01-01T00:00:00Z"}
    if namespace:
        meta["namespace"] = namespace
    return parse_static_policy_info({
        "kind": "StaticPolicy" if namespace else "ClusterStaticPolicy", "metadata": meta,
        "spec": {"weight": weight, "containers": containers}})


def _deploy(containers: list[dict[str, Any]], annotations: dict[str, str] | None = None
            ) -> WorkloadInfo:
    w = parse_workload(WorkloadType.DEPLOYMENT, {"metadata": {
        "namespace": "shop", "name": "web", "uid": "w", "annotations": annotations or {}},
        "spec": {"replicas": 2, "template": {"spec": {"containers": containers}}}}, {})
    assert w is not None
    return w


def _plan(memory: Memory | None = None, **parts: Any) -> Plan:
    defaults: dict[str, Any] = {"nodes": (NodeInfo("n1"),), "cluster_version": "v1.36.3"}
    return plan(Snapshot(**{**defaults, **parts}), SETTINGS, NOW, memory)


def _workload_patch(p: Plan) -> dict[str, Any]:
    (patch,) = [a for a in p.of(Patch) if a.path.endswith("/deployments/web")]
    return patch.body  # type: ignore[no-any-return]


APP: list[dict[str, Any]] = [
    {"name": "app", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}},
    {"name": "log"}]


def test_the_plan_is_written_on_the_workload_beside_the_compaction_intent() -> None:
    compaction = parse_policy_info({"kind": "ClusterCompactionPolicy", "metadata": {
        "name": "pack", "uid": "p", "generation": 1}, "spec": {}})
    sizes = _static("sizes", [{"name": "app", "requests": {"cpu": "500m"}},
                              {"name": "*", "requests": {"memory": "64Mi"}}])
    p = _plan(policies=(compaction,), static_policies=(sizes,), workloads=(_deploy(APP),))
    annotations = _workload_patch(p)["metadata"]["annotations"]
    assert "compactor.dev/intent" in annotations  # both apply: they never compete
    parsed = parse_resource_plan(annotations[RESOURCES])
    assert parsed.plan is not None
    assert {n: (dict(c.requests), dict(c.limits)) for n, c in parsed.plan.containers.items()} == {
        "app": ({"cpu": "500m", "memory": "64Mi"}, {}), "log": ({"memory": "64Mi"}, {})}
    assert p.resources_blocked == {}


def test_an_unchanged_plan_is_not_written_again_and_a_removed_policy_takes_it_away() -> None:
    sizes = _static("sizes", [{"name": "app", "requests": {"cpu": "500m"}}])
    first = _plan(static_policies=(sizes,), workloads=(_deploy(APP),))
    written = _workload_patch(first)["metadata"]["annotations"][RESOURCES]
    again = _plan(static_policies=(sizes,), workloads=(_deploy(APP, {RESOURCES: written}),))
    assert [a for a in again.of(Patch) if a.path.endswith("/deployments/web")] == []
    gone = _plan(static_policies=(), workloads=(_deploy(APP, {RESOURCES: written}),))
    assert _workload_patch(gone)["metadata"]["annotations"] == {RESOURCES: None}


def test_a_blocked_plan_removes_the_annotation_records_one_event_and_counts_it() -> None:
    too_big = _static("big", [{"name": "app", "requests": {"cpu": "4"}}])
    stale = '{"v":1}'
    p = _plan(static_policies=(too_big,), workloads=(_deploy(APP, {RESOURCES: stale}),))
    assert _workload_patch(p)["metadata"]["annotations"] == {RESOURCES: None}
    (event,) = [e for e in p.of(RecordEvent) if e.body["reason"] == "ResourcesBlocked"]
    assert event.body["type"] == "Warning" and event.key
    assert "container app: cpu request 4 above limit 2 (from ClusterStaticPolicy/big)" in \
        event.body["message"]
    assert p.resources_blocked == {"request_above_limit": 1}
    (status,) = [s for s in p.of(WriteStatus) if "clusterstaticpolicies" in s.path]
    assert status.status["blockedWorkloads"] == 1 and status.status["workloads"] == 1
    blocked = {c["type"]: c for c in status.status["conditions"]}["ResourcesBlocked"]
    assert blocked["status"] == "True" and "Deployment shop/web" in blocked["message"]
    # Remembered: the next pass records it no more (until an hour has passed).
    later = _plan(Memory().noted(event.key, NOW), static_policies=(too_big,),
                  workloads=(_deploy(APP),))
    assert [e for e in later.of(RecordEvent) if e.body["reason"] == "ResourcesBlocked"] == []
    assert later.resources_blocked == {}


def _pod(name: str, stamp: str | None, phase: str = "Running", priority: int | None = None,
         labels: dict[str, str] | None = None) -> PodInfo:
    return PodInfo("shop", name, f"u-{name}", labels=labels or {}, annotations={
        "compactor.dev/resources-hash": stamp} if stamp else {},
        owner=("Deployment", "web"), node_name="n1", phase=phase, priority=priority)


def test_status_counts_the_running_pods_not_created_under_the_current_plan() -> None:
    sizes = _static("sizes", [{"name": "app", "requests": {"cpu": "500m"}}], namespace="shop")
    first = _plan(static_policies=(sizes,), workloads=(_deploy(APP),))
    parsed = parse_resource_plan(_workload_patch(first)["metadata"]["annotations"][RESOURCES])
    assert parsed.plan is not None
    pods = (_pod("new", parsed.plan.hash), _pod("old", None), _pod("older", "0123456789ab"),
            _pod("done", None, "Succeeded"))
    p = _plan(static_policies=(sizes,), workloads=(_deploy(APP),), pods=pods)
    (status,) = [s for s in p.of(WriteStatus) if "/staticpolicies/sizes" in s.path]
    assert status.path.startswith("/apis/compactor.dev/v1alpha1/namespaces/shop/")
    assert (status.status["workloads"], status.status["podsDiffering"],
            status.status["observedGeneration"]) == (1, 2, 2)


@pytest.mark.parametrize(("pod", "counted"), [
    (_pod("placeholder", None, priority=-10), 0),
    (_pod("deeper-placeholder", None, priority=-100), 0),
    (_pod("just-above", None, priority=-9), 1),
    (_pod("opted-out", None, labels={"compactor.dev/ignore": "true"}), 0),
    (_pod("not-opted-out", None, labels={"compactor.dev/ignore": "false"}), 1),
], ids=["priority-minus-10", "priority-minus-100", "priority-minus-9", "ignore-true",
        "ignore-false"])
def test_pods_the_webhook_never_resizes_do_not_count_as_differing(pod: PodInfo,
                                                                  counted: int) -> None:
    sizes = _static("sizes", [{"name": "app", "requests": {"cpu": "500m"}}], namespace="shop")
    first = _plan(static_policies=(sizes,), workloads=(_deploy(APP),))
    parsed = parse_resource_plan(_workload_patch(first)["metadata"]["annotations"][RESOURCES])
    assert parsed.plan is not None
    # Every other Pod was admitted under the plan: after a rollout, only ``pod`` may differ.
    rolled = (_pod("new-1", parsed.plan.hash), _pod("new-2", parsed.plan.hash), pod)
    p = _plan(static_policies=(sizes,), workloads=(_deploy(APP),), pods=rolled)
    (status,) = [s for s in p.of(WriteStatus) if "/staticpolicies/sizes" in s.path]
    assert status.status["podsDiffering"] == counted


def test_an_invalid_resource_policy_is_reported_and_used_for_nothing() -> None:
    bad = parse_static_policy_info({"kind": "ClusterStaticPolicy", "metadata": {
        "name": "bad", "generation": 1}, "spec": {"containers": [
            {"name": "app", "requests": {"cpu": "lots"}}]}})
    p = _plan(static_policies=(bad,), workloads=(_deploy(APP),))
    assert [a for a in p.of(Patch) if a.path.endswith("/deployments/web")] == []
    (status,) = p.of(WriteStatus)
    valid = {c["type"]: c for c in status.status["conditions"]}["Valid"]
    assert valid["status"] == "False" and "is not a quantity" in valid["message"]
