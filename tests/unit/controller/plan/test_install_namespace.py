"""Compactor installed in a namespace of the operator's choosing (``PlanSettings.namespace``,
from the controller's downward API): that namespace is protected as kube-system is, in the
drain plan, in the Pods a pass labels and in each rendered descheduler config, and what the
controller creates goes there. ``plan`` is pure: a snapshot in, the actions and drains out."""

from __future__ import annotations

import datetime
from typing import Any

import yaml

from compaction.validation import validate_policy
from compaction.workload import WorkloadType
from controller.components.pod_settings import RuntimeSettings
from controller.plan.actions import Apply, Patch, Target
from controller.plan.decide import drain_plans, plan
from controller.plan.settings import PlanSettings
from controller.process.settings import load
from controller.snapshot.node import NodeInfo
from controller.snapshot.owner import OwnerInfo
from controller.snapshot.pod import PodInfo
from controller.snapshot.policies import parse_policy_info
from controller.snapshot.snapshot import Snapshot
from controller.snapshot.workload import parse_workload

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
GI = 2**30 * 1000
ELSEWHERE = PlanSettings(RuntimeSettings(), namespace="ops")
DEFAULT = PlanSettings(RuntimeSettings())
POLICY = parse_policy_info({
    "apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
    "metadata": {"name": "p", "uid": "uid-p", "generation": 1,
                 "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"scope": {"namespaceSelector": {"operator": "In", "values": ["shop", "ops"]}},
             "descheduler": {"highNodeUtilization": {
                 "thresholds": {"cpu": 80, "memory": 80, "pods": 80}}}}})


def _pod(ns: str, name: str, node: str, cpu: float) -> PodInfo:
    return PodInfo(ns, name, f"uid-{ns}-{name}", {"app": "web"}, {}, ("ReplicaSet", "web-1"),
                   node_name=node, phase="Running", ready=True,
                   requests={"cpu": int(cpu * 1000), "memory": GI})


def _snapshot() -> Snapshot:
    """Deployment ``web`` in ``shop`` (two Pods on ``dense``) and in ``ops`` (one Pod alone on
    ``sparse``), both in the policy's scope."""
    workloads, owners = [], []
    for ns in ("shop", "ops"):
        w = parse_workload(WorkloadType.DEPLOYMENT, {"metadata": {
            "namespace": ns, "name": "web", "uid": f"w-{ns}"}, "spec": {"replicas": 1}}, {})
        assert w is not None
        workloads.append(w)
        owners.append(OwnerInfo("ReplicaSet", ns, "web-1", ("Deployment", "web"), {}))
    nodes = tuple(NodeInfo(n, {"kubernetes.io/hostname": n},
                           {"cpu": 4000, "memory": 16 * GI, "pods": 110_000})
                  for n in ("dense", "sparse"))
    pods = (_pod("shop", "web-1-a", "dense", 1.5), _pod("shop", "web-1-b", "dense", 1),
            _pod("ops", "web-1-c", "sparse", 0.5))
    return Snapshot(policies=(POLICY,), nodes=nodes, workloads=tuple(workloads),
                    owners=tuple(owners), pods=pods, cluster_version="v1.36.3")


def test_a_pod_of_the_install_namespace_keeps_its_node_in_the_drain_plan() -> None:
    (installed_elsewhere,) = drain_plans(_snapshot(), ELSEWHERE, NOW)
    assert "sparse" not in installed_elsewhere.freeable
    (held,) = [u for u in installed_elsewhere.unremovable if u.node == "sparse"]
    assert [(r.code, r.text) for r in held.reasons] == [
        ("protected_namespace", "pod ops/web-1-c is in ops")]
    # Installed in compactor-system, the same Pod is any other workload's and moves.
    (by_default,) = drain_plans(_snapshot(), DEFAULT, NOW)
    assert by_default.freeable == ("sparse",)


def test_the_pods_of_the_install_namespace_are_never_labelled() -> None:
    def labelled(settings: PlanSettings) -> set[str]:
        return {a.path.rsplit("/", 1)[-1] for a in plan(_snapshot(), settings, NOW).of(Patch)
                if a.target is Target.POD}
    assert labelled(ELSEWHERE) == {"web-1-a", "web-1-b"}
    assert labelled(DEFAULT) == {"web-1-a", "web-1-b", "web-1-c"}


def _applied(settings: PlanSettings) -> dict[str, dict[str, Any]]:
    return {a.path: dict(a.body) for a in plan(_snapshot(), settings, NOW).of(Apply)}


def test_the_descheduler_goes_to_the_install_namespace_and_never_evicts_from_it() -> None:
    applied = _applied(ELSEWHERE)
    config = applied["/api/v1/namespaces/ops/configmaps/compactor-descheduler-p"]
    assert "/apis/batch/v1/namespaces/ops/cronjobs/compactor-descheduler-p" in applied
    doc = yaml.safe_load(config["data"]["policy.yaml"])
    (taints,) = [c["args"] for c in doc["profiles"][0]["pluginConfig"]
                 if c["name"] == "RemovePodsViolatingNodeTaints"]
    assert taints["namespaces"] == {"exclude": ["kube-system", "ops"]}
    assert not [p for p in applied if "/namespaces/compactor-system/" in p]


def test_a_namespaced_policy_in_the_install_namespace_is_refused() -> None:
    body = {"apiVersion": "compactor.dev/v1alpha1", "kind": "CompactionPolicy",
            "metadata": {"name": "mine", "namespace": "ops"}, "spec": {}}
    assert [(p.path, p.message) for p in validate_policy(body, ELSEWHERE.protected_namespaces)
            ] == [("metadata.namespace", "Compactor never manages Pods in ops")]
    assert parse_policy_info(body, ELSEWHERE.protected_namespaces).policy is None
    assert validate_policy(body) == []  # installed in compactor-system, ops is anyone's


def test_the_controller_reads_its_namespace_and_certifies_the_webhook_service_there() -> None:
    settings = load({"COMPACTOR_NAMESPACE": "ops"})
    assert settings.plan.protected_namespaces == {"kube-system", "ops"}
    assert settings.certs is not None and settings.certs.namespace == "ops"
    assert settings.certs.names.dns == ("compactor-webhook", "compactor-webhook.ops",
                                        "compactor-webhook.ops.svc",
                                        "compactor-webhook.ops.svc.cluster.local")
