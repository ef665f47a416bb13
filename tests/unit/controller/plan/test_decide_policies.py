"""A pass with both compaction kinds and the PolicyEvaluation, as table tests: which policy a
workload gets and why, the namespaced policy's own objects, the singleton's creation and
status (``plan`` is pure)."""

from __future__ import annotations

import datetime
from typing import Any

import yaml

from compaction.workload import WorkloadType
from controller.components.pod_settings import RuntimeSettings
from controller.plan.actions import (
    Apply,
    Create,
    Delete,
    Patch,
    Plan,
    RecordEvent,
    Target,
    WriteStatus,
)
from controller.plan.decide import plan
from controller.plan.settings import PlanSettings
from controller.snapshot.node import NodeInfo
from controller.snapshot.owned import OwnedInfo
from controller.snapshot.policies import parse_evaluation_info, parse_policy_info
from controller.snapshot.snapshot import Snapshot
from controller.snapshot.workload import WorkloadInfo, parse_workload

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
SETTINGS = PlanSettings(RuntimeSettings())
EVALUATIONS = "/apis/compactor.dev/v1alpha1/policyevaluations"


def _policy(kind: str, name: str, namespace: str = "", weight: int = 0) -> Any:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "generation": 1,
                            "creationTimestamp": "2026-01-01T00:00:00Z"}
    if namespace:
        meta["namespace"] = namespace
    return parse_policy_info({"apiVersion": "compactor.dev/v1alpha1", "kind": kind,
                                "metadata": meta, "spec": {"weight": weight}})


CLUSTER = _policy("ClusterCompactionPolicy", "prod", weight=0)
TEAM = _policy("CompactionPolicy", "team", "shop", weight=100)


def _evaluation(**priorities: int) -> Any:
    return parse_evaluation_info({
        "apiVersion": "compactor.dev/v1alpha1", "kind": "PolicyEvaluation",
        "metadata": {"name": "policy-evaluation", "uid": "pe", "generation": 3},
        "spec": {"precedence": [{"type": t, "priority": p} for t, p in priorities.items()]}})


def _deploy(ns: str = "shop", labels: dict[str, str] | None = None) -> WorkloadInfo:
    w = parse_workload(WorkloadType.DEPLOYMENT, {"metadata": {
        "namespace": ns, "name": "web", "uid": f"w-{ns}", "labels": labels or {}},
        "spec": {"replicas": 1}}, {})
    assert w is not None
    return w


def _plan(**parts: Any) -> Plan:
    defaults: dict[str, Any] = {"nodes": (NodeInfo("n1"),), "cluster_version": "v1.36.3",
                                "policies": (CLUSTER, TEAM), "workloads": (_deploy(),)}
    return plan(Snapshot(**{**defaults, **parts}), SETTINGS, NOW)


def _winner(p: Plan) -> tuple[str, RecordEvent]:
    (patch,) = [a for a in p.of(Patch) if a.target is Target.WORKLOAD]
    (event,) = patch.then
    assert isinstance(event, RecordEvent)
    return patch.body["metadata"]["labels"]["compactor.dev/policy"], event


def test_the_cluster_policy_wins_by_default_and_the_event_says_why() -> None:
    policy, event = _winner(_plan())
    assert policy == "prod"
    assert event.body["message"] == (
        "ClusterCompactionPolicy/prod won over CompactionPolicy/shop/team: "
        "type priority 100 > 90")
    assert _plan().selections == (
        "Deployment shop/web: ClusterCompactionPolicy/prod won over "
        "CompactionPolicy/shop/team: type priority 100 > 90",)


def test_priorities_swapped_give_the_namespaced_policy_and_the_event_names_the_change(
        ) -> None:
    swapped = _evaluation(CompactionPolicy=100, ClusterCompactionPolicy=90)
    policy, event = _winner(_plan(evaluation=swapped,
                                  workloads=(_deploy(labels={"compactor.dev/policy": "prod"}),)))
    assert policy == "shop.team"
    assert event.body["message"] == (
        "CompactionPolicy/shop/team won over ClusterCompactionPolicy/prod: "
        "type priority 100 > 90 (was 'prod')")


def test_equal_priorities_let_weight_decide() -> None:
    policy, event = _winner(_plan(evaluation=_evaluation(
        CompactionPolicy=80, ClusterCompactionPolicy=80)))
    assert policy == "shop.team" and "weight 100 > 0" in event.body["message"]


def test_a_namespaced_policy_never_reaches_another_namespace() -> None:
    p = _plan(policies=(TEAM,), workloads=(_deploy("shop"), _deploy("bank")))
    patched = {a.path for a in p.of(Patch) if a.target is Target.WORKLOAD}
    assert patched == {"/apis/apps/v1/namespaces/shop/deployments/web"}


def test_a_namespaced_policys_descheduler_is_its_own_evicting_in_its_namespace_only() -> None:
    p = _plan(policies=(TEAM,))
    applied = {a.path: a.body for a in p.of(Apply)}
    cm = applied["/api/v1/namespaces/compactor-system/configmaps/compactor-descheduler-shop.team"]
    cron = applied["/apis/batch/v1/namespaces/compactor-system/cronjobs/"
                   "compactor-descheduler-shop.team"]
    for body in (cm, cron):
        assert body["metadata"]["labels"]["compactor.dev/policy"] == "shop.team"
        assert "ownerReferences" not in body["metadata"]  # none can cross namespaces
    doc = yaml.safe_load(cm["data"]["policy.yaml"])
    args = {c["name"]: c["args"] for c in doc["profiles"][0]["pluginConfig"]}
    assert args["DefaultEvictor"]["namespaceLabelSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["shop"]}]}
    assert {"key": "compactor.dev/policy", "operator": "In", "values": ["shop.team"]} in \
        args["DefaultEvictor"]["labelSelector"]["matchExpressions"]
    assert args["RemovePodsViolatingNodeTaints"]["namespaces"] == {"include": ["shop"]}
    # The taint's key only (a shared node carries one taint); the draining label of the
    # evictor's selector keeps this descheduler to its own Pods.
    assert args["RemovePodsViolatingNodeTaints"]["includedTaints"] == ["compactor.dev/drain"]
    assert {"key": "compactor.dev/draining", "operator": "In", "values": ["shop.team"]} in \
        args["DefaultEvictor"]["labelSelector"]["matchExpressions"]


def test_a_deleted_namespaced_policys_objects_are_deleted() -> None:
    labels = {"app.kubernetes.io/component": "descheduler", "compactor.dev/policy": "shop.team"}
    own = tuple(OwnedInfo(kind, "compactor-descheduler-shop.team", labels, "r1")
                for kind in ("ConfigMap", "CronJob"))
    p = _plan(policies=(CLUSTER,), own=own)
    assert {a.path for a in p.of(Delete)} >= {
        "/api/v1/namespaces/compactor-system/configmaps/compactor-descheduler-shop.team",
        "/apis/batch/v1/namespaces/compactor-system/cronjobs/compactor-descheduler-shop.team"}


def test_status_goes_to_each_kinds_own_path() -> None:
    paths = {a.path for a in _plan().of(WriteStatus)}
    assert {"/apis/compactor.dev/v1alpha1/clustercompactionpolicies/prod/status",
            "/apis/compactor.dev/v1alpha1/namespaces/shop/compactionpolicies/team/status"} <= paths


def test_the_default_evaluation_is_created_only_while_none_exists_and_only_if_asked() -> None:
    (create,) = _plan().of(Create)
    assert create.path == EVALUATIONS and create.body["metadata"]["name"] == "policy-evaluation"
    assert create.body["spec"]["precedence"] == [
        {"type": "ClusterCompactionPolicy", "priority": 100},
        {"type": "CompactionPolicy", "priority": 90},
        {"type": "ClusterStaticPolicy", "priority": 90},
        {"type": "StaticPolicy", "priority": 90}]
    assert _plan(evaluation=_evaluation(CompactionPolicy=5)).of(Create) == []
    off = PlanSettings(RuntimeSettings(), default_evaluation=False)
    assert plan(Snapshot(), off, NOW).of(Create) == []


def test_the_evaluations_status_shows_known_and_unknown_types() -> None:
    p = _plan(evaluation=_evaluation(CompactionPolicy=110, RollbackPolicy=130))
    (status,) = [a for a in p.of(WriteStatus) if a.path.startswith(EVALUATIONS)]
    assert status.path == f"{EVALUATIONS}/policy-evaluation/status"
    body = status.status
    assert body["observedGeneration"] == 3 and body["unknownTypes"] == ["RollbackPolicy"]
    assert body["knownTypes"] == [
        {"type": "ClusterCompactionPolicy", "priority": 100, "source": "default"},
        {"type": "CompactionPolicy", "priority": 110, "source": "spec"},
        {"type": "ClusterStaticPolicy", "priority": 90, "source": "default"},
        {"type": "StaticPolicy", "priority": 90, "source": "default"}]
    (valid,) = body["conditions"]
    assert valid["type"] == "Valid" and valid["status"] == "True"
    assert "RollbackPolicy" in valid["message"]
