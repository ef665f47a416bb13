"""Which policy wins, against the real API server: the PolicyEvaluation and CompactionPolicy
CRDs' refusals, the reference's PolicyEvaluation applied as published, a cluster and a
namespaced policy on one Deployment with the ranking swapped live (the webhook process admits
the Pods), a namespaced policy's own descheduler objects, and the real descheduler kept to
that policy's namespace."""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from compaction import names
from compaction.intent import parse_intent
from compaction.policy import policy_id
from compaction.validation import parse_policy
from controller.components.descheduler import POLICY_KEY, render_descheduler_policy
from controller.process.reconciler import Reconciler
from localcluster import ApiError, Cluster, Kube
from localcluster.cluster.control_plane import NodeShape
from localcluster.cluster.kube import path, wait_for
from tests.integration.conftest import POLICY_API, Policies
from tests.integration.helpers import (
    WEBHOOK_NAMESPACE_LABEL,
    RunningWebhook,
    deployment,
    descheduler_dry_run,
    evicted_in_dry_run,
    gone,
    named_pods,
    owner_ref,
    pinned_replica_set,
    pod_template,
    pods_of,
    running_pods,
    with_witness,
)
from tests.reference import reference_policy_evaluation

EVALUATION = path("policyevaluations", name=names.EVALUATION_NAME, api=POLICY_API)


def _cp(namespace: str, name: str | None = None) -> str:
    return path("compactionpolicies", namespace, name, api=POLICY_API)


def _cp_body(name: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "compactor.dev/v1alpha1", "kind": "CompactionPolicy",
            "metadata": {"name": name}, "spec": spec or {}}


def _evaluation(precedence: list[dict[str, Any]], name: str = names.EVALUATION_NAME
                ) -> dict[str, Any]:
    return {"apiVersion": "compactor.dev/v1alpha1", "kind": "PolicyEvaluation",
            "metadata": {"name": name}, "spec": {"precedence": precedence}}


def _refusal(kube: Kube, url: str, body: dict[str, Any]) -> str:
    with pytest.raises(ApiError) as e:
        kube.create(url, body, dry_run=True)
    assert e.value.status == 422, e.value
    return e.value.message


@pytest.fixture
def evaluation(kube: Kube, compactor_crds: None) -> Iterator[None]:
    """The singleton is the cluster's: whatever a test sets is deleted afterwards (the next
    pass, here or in another test, creates the default again)."""
    kube.delete(EVALUATION)
    yield
    kube.delete(EVALUATION)


AT_LEAST_ONE = "should be greater than or equal to 1"


@pytest.mark.parametrize(("body", "says"), [
    (_evaluation([{"type": "CompactionPolicy", "priority": 5}], name="other"),
     "metadata.name must be policy-evaluation"),
    (_evaluation([{"type": "CompactionPolicy", "priority": 5},
                  {"type": "CompactionPolicy", "priority": 7}]), "Duplicate value"),
    (_evaluation([{"type": "CompactionPolicy", "priority": 0}]), AT_LEAST_ONE),
    (_evaluation([{"type": "CompactionPolicy", "priority": -3}]), AT_LEAST_ONE),
    (_evaluation([{"type": "CompactionPolicy"}]), "priority: Required value"),
], ids=["wrong-name", "duplicate-type", "zero-priority", "negative-priority", "no-priority"])
def test_the_policy_evaluation_crd_refuses_what_the_reference_forbids(
        kube: Kube, evaluation: None, body: dict[str, Any], says: str) -> None:
    url = path("policyevaluations", api=POLICY_API)
    assert says in _refusal(kube, url, body)


@pytest.mark.asyncio
async def test_the_reference_policy_evaluation_applies_as_published_and_ranks_nothing_unknown(
        kube: Kube, evaluation: None, in_process_reconciler: Reconciler) -> None:
    manifest = reference_policy_evaluation()
    kube.create(path("policyevaluations", api=POLICY_API), manifest)
    stored = kube.get(EVALUATION)
    assert stored["spec"] == manifest["spec"]  # kept as written, unknown types included
    await in_process_reconciler.reconcile()
    status = kube.get(EVALUATION)["status"]
    assert status["observedGeneration"] == stored["metadata"]["generation"]
    resource_kinds = ("StaticPolicy", "ClusterStaticPolicy")
    assert status["unknownTypes"] == [e["type"] for e in manifest["spec"]["precedence"]
                                      if e["type"] not in resource_kinds]
    # It names the resource kinds (at 90, their default) and neither compaction kind: both
    # of those keep their default priority.
    assert status["knownTypes"] == [
        {"type": "ClusterCompactionPolicy", "priority": 100, "source": "default"},
        {"type": "CompactionPolicy", "priority": 90, "source": "default"},
        {"type": "ClusterStaticPolicy", "priority": 90, "source": "spec"},
        {"type": "StaticPolicy", "priority": 90, "source": "spec"}]
    (valid,) = [c for c in status["conditions"] if c["type"] == "Valid"]
    assert valid["status"] == "True" and "ClusterRollbackPolicy" in valid["message"]


@pytest.mark.asyncio
async def test_the_default_policy_evaluation_is_created_once_and_an_edit_is_kept(
        kube: Kube, evaluation: None, in_process_reconciler: Reconciler) -> None:
    await in_process_reconciler.reconcile()
    made = kube.get(EVALUATION)
    assert made["spec"]["precedence"] == [{"type": "ClusterCompactionPolicy", "priority": 100},
                                          {"type": "CompactionPolicy", "priority": 90},
                                          {"type": "ClusterStaticPolicy", "priority": 90},
                                          {"type": "StaticPolicy", "priority": 90}]
    kube.patch(EVALUATION, {"spec": {"precedence": [
        {"type": "CompactionPolicy", "priority": 100}]}})
    await in_process_reconciler.reconcile()
    kept = kube.get(EVALUATION)
    assert kept["spec"]["precedence"] == [{"type": "CompactionPolicy", "priority": 100}]
    assert kept["status"]["observedGeneration"] == kept["metadata"]["generation"]
    assert kept["status"]["knownTypes"][0] == {
        "type": "ClusterCompactionPolicy", "priority": 100, "source": "default"}


@pytest.mark.parametrize(("spec", "says"), [
    ({"scope": {"namespaceSelector": {"operator": "In", "values": ["other"]}}},
     "spec.scope.namespaceSelector may not be set on a CompactionPolicy"),
    ({"descheduler": {"nodeSelector": {"matchLabels": {"pool": "a"}}}},
     "the node pool is the cluster admin's"),
    ({"descheduler": {"maxDrainingNodes": 3}}, "maxDrainingNodes may not be set other than 1"),
    ({"descheduler": {"defaultEvictor": {"evictSystemCriticalPods": True}}},
     "evicting system-critical Pods is the cluster admin's to allow"),
    ({"descheduler": {"defaultEvictor": {"ignorePvcPods": False}}},
     "with a PersistentVolumeClaim is the cluster admin's to allow"),
    ({"descheduler": {"defaultEvictor": {"evictLocalStoragePods": True}}},
     "evicting Pods with local storage is the cluster admin's to allow"),
    ({"descheduler": {"defaultEvictor": {"evictDaemonSetPods": True}}},
     "evicting DaemonSet Pods is the cluster admin's to allow"),
], ids=["namespace-selector", "node-pool", "draining-nodes", "system-critical", "pvc",
        "local-storage", "daemonset"])
def test_a_compaction_policy_may_not_set_what_the_cluster_admin_keeps(
        kube: Kube, namespace: str, compactor_crds: None, spec: dict[str, Any],
        says: str) -> None:
    assert says in _refusal(kube, _cp(namespace), _cp_body("team", spec))


def test_a_compaction_policy_may_set_what_its_namespace_owner_decides(
        kube: Kube, namespace: str, compactor_crds: None) -> None:
    body = _cp_body("team", {"weight": 40, "scope": {"workloadTypes": ["Deployment"]},
                             "descheduler": {"maxDrainingNodes": 1, "defaultEvictor": {
                                 "ignorePvcPods": True, "evictLocalStoragePods": False}}})
    created = kube.create(_cp(namespace), body, dry_run=True)
    assert created["metadata"]["namespace"] == namespace


def _admitted(kube: Kube, ns: str, owner: dict[str, Any]) -> tuple[str | None, str]:
    """The policy label and scheduler admission gives a new Pod of ``owner`` now (a dry
    run: nothing is created)."""
    pod = kube.create(path("pods", ns), {
        "metadata": {"generateName": "probe-", "ownerReferences": [owner_ref(owner)]},
        "spec": pod_template({"app": "probe"})["spec"]}, dry_run=True)
    return (pod["metadata"].get("labels") or {}).get(names.POLICY_LABEL), \
        pod["spec"].get("schedulerName", "")


def _events(kube: Kube, ns: str, name: str) -> list[str]:
    return [e["message"] for e in kube.items(path("events", ns))
            if e["involvedObject"]["name"] == name and e["reason"] == "CompactionPolicyChanged"]


@pytest.mark.asyncio
async def test_the_cluster_policy_wins_by_default_and_a_live_swap_reranks_new_pods(
        kube: Kube, namespace: str, webhook: RunningWebhook, evaluation: None,
        compaction_policies: Policies, in_process_reconciler: Reconciler,
        caplog: pytest.LogCaptureFixture) -> None:
    ns = namespace
    kube.patch(path("namespaces", name=ns), {"metadata": {"labels": {
        WEBHOOK_NAMESPACE_LABEL: "on"}}})
    cluster_policy = compaction_policies.make(ns, {"weight": 0})
    # The namespace owner's policy outweighs it, and still loses on type priority.
    kube.create(_cp(ns), _cp_body("team", {"weight": 90, "scheduler": {
        "useManagedScheduler": False, "externalSchedulerName": "team-scheduler"}}))
    team = policy_id(ns, "team")
    kube.create(path("deployments", ns), deployment("web", 1))
    pods_of(kube, ns, "app=web", 1)
    caplog.set_level(logging.INFO, logger="compactor.controller")

    await in_process_reconciler.reconcile()
    web = kube.get(path("deployments", ns, "web"))
    parsed = parse_intent(web["metadata"]["annotations"][names.INTENT_ANNOTATION])
    assert parsed.intent is not None and parsed.intent.policy == cluster_policy
    assert _events(kube, ns, "web") == [
        f"ClusterCompactionPolicy/{cluster_policy} won over CompactionPolicy/{ns}/team: "
        f"type priority 100 > 90"]
    (rs,) = kube.items(path("replicasets", ns))
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", **rs}
    wait_for("admission to give the cluster policy's intent",
             lambda: _admitted(kube, ns, rs) == (cluster_policy, "compactor-scheduler"))

    # Favour namespace policies, as the reference's example does: one pass re-ranks.
    kube.apply(EVALUATION, _evaluation([{"type": "ClusterCompactionPolicy", "priority": 100},
                                        {"type": "CompactionPolicy", "priority": 110}]))
    await in_process_reconciler.reconcile()
    web = kube.get(path("deployments", ns, "web"))
    assert web["metadata"]["labels"][names.POLICY_LABEL] == team
    swapped = (f"CompactionPolicy/{ns}/team won over ClusterCompactionPolicy/{cluster_policy}: "
               f"type priority 110 > 100 (was '{cluster_policy}')")
    assert swapped in _events(kube, ns, "web")
    assert f"selection summary: Deployment {ns}/web: {swapped}" in caplog.text
    wait_for("admission to follow the swap",
             lambda: _admitted(kube, ns, rs) == (team, "team-scheduler"), timeout=20)
    before = {p["metadata"]["uid"] for p in kube.items(path("pods", ns), "app=web")}
    kube.patch(path("deployments", ns, "web"), {"spec": {"replicas": 2}})
    (new,) = [p for p in pods_of(kube, ns, "app=web", 2) if p["metadata"]["uid"] not in before]
    assert new["metadata"]["labels"][names.POLICY_LABEL] == team
    assert new["spec"]["schedulerName"] == "team-scheduler"

    # Equal priorities: weight decides, and the namespace owner's 90 beats 0.
    kube.apply(EVALUATION, _evaluation([{"type": "ClusterCompactionPolicy", "priority": 100},
                                        {"type": "CompactionPolicy", "priority": 100}]))
    await in_process_reconciler.reconcile()
    assert kube.get(path("deployments", ns, "web"))["metadata"]["labels"][
        names.POLICY_LABEL] == team
    # Back to the defaults (the singleton deleted): the cluster admin's policy again.
    kube.delete(EVALUATION)
    await in_process_reconciler.reconcile()
    assert kube.get(path("deployments", ns, "web"))["metadata"]["labels"][
        names.POLICY_LABEL] == cluster_policy
    kube.delete(_cp(ns, "team"))


@pytest.mark.asyncio
async def test_a_namespaced_policys_descheduler_is_its_own_and_goes_with_it(
        kube: Kube, namespace: str, evaluation: None,
        in_process_reconciler: Reconciler) -> None:
    name = "a-rather-long-policy-name-for-the-team-that-owns-this-namespace"
    kube.create(_cp(namespace), _cp_body(name))
    pid = policy_id(namespace, name)
    assert len(pid) <= names.MAX_POLICY_ID and pid.startswith(namespace[:8])
    await in_process_reconciler.reconcile()
    cron = kube.get(path("cronjobs", names.INSTALL_NAMESPACE, names.descheduler_name(pid)))
    config = kube.get(path("configmaps", names.INSTALL_NAMESPACE, names.descheduler_name(pid)))
    # No owner reference can point at another namespace: the controller deletes them itself.
    assert "ownerReferences" not in cron["metadata"]
    assert "ownerReferences" not in config["metadata"]
    doc = yaml.safe_load(config["data"][POLICY_KEY])
    evictor = doc["profiles"][0]["pluginConfig"][0]["args"]
    assert evictor["namespaceLabelSelector"] == {"matchExpressions": [{
        "key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace]}]}
    status = kube.get(_cp(namespace, name))["status"]
    assert status["observedGeneration"] == 1

    kube.delete(_cp(namespace, name))
    await in_process_reconciler.reconcile()
    assert gone(kube, path("cronjobs", names.INSTALL_NAMESPACE, names.descheduler_name(pid)))
    assert gone(kube, path("configmaps", names.INSTALL_NAMESPACE, names.descheduler_name(pid)))


def test_real_descheduler_of_a_namespaced_policy_evicts_in_its_namespace_only(
        cluster: Cluster, kube: Kube, workloads: Cluster, compactor_crds: None,
        tmp_path: Path) -> None:
    """Pods of another namespace that carry the policy's labels, as anyone with edit rights
    there could set them, stay where they are on the node the plan drains."""
    own, other = (f"t-{uuid.uuid4().hex[:8]}" for _ in range(2))
    for ns in (own, other):
        kube.ensure_namespace(ns, default_service_account=True)
    pool = f"pool-{uuid.uuid4().hex[:5]}"
    dense, sparse = f"{pool}-dense", f"{pool}-sparse"
    cluster.add_nodes(kube, [dense, sparse], NodeShape(cpu="4", memory="16Gi", pods="110"),
                      labels={"compactor.test/pool": pool})
    try:
        policy = parse_policy({"kind": "CompactionPolicy",
                               "metadata": {"name": "team", "namespace": own, "uid": "u3"},
                               "spec": {"descheduler": {
                                   "maxNoOfPodsToEvictPerNode": 10,
                                   "maxNoOfPodsToEvictPerNamespace": 10,
                                   "maxNoOfPodsToEvictTotal": 10}}})
        pid = policy.id
        assert pid == f"{own}.team"
        managed = {names.POLICY_LABEL: pid, names.WORKLOAD_KIND_LABEL: "Deployment",
                   names.DRAINING_LABEL: pid}
        for ns in (own, other):
            wait_for("default ServiceAccount",
                     functools.partial(kube.get, path("serviceaccounts", ns, "default")))
            kube.create(path("replicasets", ns),
                        pinned_replica_set("packed", sparse, 2, "200m", managed))
        for ns in (own, other):
            def up(s: str = ns) -> list[dict[str, Any]] | None:
                return running_pods(kube, s, "app=packed", 2)
            wait_for(f"{ns} packed running", up)
        kube.patch(path("nodes", name=sparse), {"spec": {"taints": [{
            "key": names.DRAIN_TAINT, "value": pid, "effect": "PreferNoSchedule"}]}})
        doc = render_descheduler_policy(policy, {})
        packed = {ns: {f"{ns}/{p['metadata']['name']}"
                       for p in kube.items(path("pods", ns), "app=packed")}
                  for ns in (own, other)}
        # Until its snapshot held all four (the look-alikes were seen, not missed).
        log = descheduler_dry_run(cluster, with_witness(doc), tmp_path, lambda text: (
            packed[own] | packed[other] <= named_pods(text)))
        assert set(evicted_in_dry_run(log)) == packed[own], log[-3000:]
    finally:
        kube.patch(path("nodes", name=sparse), {"spec": {"taints": None}})
        for ns in (own, other):
            kube.delete(path("namespaces", name=ns))
