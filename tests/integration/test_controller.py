"""The controller's reconcile pass against the real API server, controller manager and kwok."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml

from compaction.intent import parse_intent
from controller.kubeapi.client import Api
from controller.process.reconciler import Reconciler
from controller.process.settings import load
from localcluster import Cluster, Kube
from localcluster.cluster.control_plane import NodeShape
from localcluster.cluster.kube import path, wait_for
from localcluster.cluster.process import Process, free_port
from tests.integration.helpers import (
    HARNESS_PLAN,
    ROOT,
    admitted_by_an_older_crd,
    clear_waiting_on_compaction_scheduler,
    deployment,
    gone,
    running_pods,
)

API = "apis/compactor.dev/v1alpha1"
CRD = ROOT / "deploy" / "crds" / "compactor.dev_clustercompactionpolicies.yaml"


def _ccp(name: str | None = None) -> str:
    return path("clustercompactionpolicies", name=name, api=API)


@pytest.fixture(scope="module")
def crd(kube: Kube, workloads: Cluster) -> None:
    obj = yaml.safe_load(CRD.read_text())
    kube.apply(path("customresourcedefinitions", name=obj["metadata"]["name"]), obj)
    wait_for("CRD served", lambda: kube.get(f"/{API}").get("resources"))
    kube.ensure_namespace("compactor-system")


@pytest.fixture
def policies(kube: Kube, crd: None) -> Iterator[list[str]]:
    """Names of the policies a test creates; they are deleted after it."""
    created: list[str] = []
    yield created
    for name in created:
        kube.delete(_ccp(name))


def _policy(policies: list[str], kube: Kube, namespace: str,
            spec: dict[str, Any] | None = None) -> str:
    name = f"p-{uuid.uuid4().hex[:8]}"
    body = {"scope": {"namespaceSelector": {"operator": "In", "values": [namespace]}},
            **(spec or {})}
    kube.create(_ccp(), {"apiVersion": "compactor.dev/v1alpha1",
                         "kind": "ClusterCompactionPolicy", "metadata": {"name": name},
                         "spec": body})
    policies.append(name)
    return name


@pytest_asyncio.fixture
async def reconciler(cluster: Cluster, crd: None) -> AsyncIterator[Reconciler]:
    api = await Api.connect(str(cluster.kubeconfig))
    yield Reconciler(api, HARNESS_PLAN)
    await api.close()


@pytest.mark.asyncio
async def test_workload_gets_label_and_intent_and_its_pods_are_patched_without_a_rollout(
        kube: Kube, namespace: str, policies: list[str], reconciler: Reconciler) -> None:
    kube.create(path("deployments", namespace), deployment("web", 2))
    wait_for("2 running", lambda: running_pods(kube, namespace, "app=web", 2))
    before = kube.get(path("deployments", namespace, "web"))
    wait_for("observed", lambda: kube.get(path("deployments", namespace, "web"))
             ["status"].get("observedGeneration") == before["metadata"]["generation"])
    rs_before = {r["metadata"]["name"] for r in kube.items(path("replicasets", namespace))}
    pods_before = {p["metadata"]["uid"] for p in kube.items(path("pods", namespace), "app=web")}

    # No node is below thresholds of 0: the other tests' Pods share the kwok nodes, and a
    # drain planned among them would mark a Pod of this workload between the two passes.
    name = _policy(policies, kube, namespace, {"descheduler": {"highNodeUtilization": {
        "thresholds": {"cpu": 0, "memory": 0, "pods": 0}}}})
    summary = await reconciler.reconcile()
    assert summary.managed.get(name) == 1 and not summary.invalid

    after = kube.get(path("deployments", namespace, "web"))
    assert after["metadata"]["labels"]["compactor.dev/policy"] == name
    parsed = parse_intent(after["metadata"]["annotations"]["compactor.dev/intent"])
    assert parsed.intent is not None and parsed.intent.policy == name
    assert parsed.intent.scheduler_name == "compactor-scheduler"
    # Metadata only: the spec and template are untouched, so no rollout: the same ReplicaSet
    # and the same Pods. (The API server does bump a Deployment's generation for annotation
    # changes, since the Deployment controller copies annotations onto its ReplicaSets.)
    assert after["spec"] == before["spec"]
    wait_for("observed", lambda: kube.get(path("deployments", namespace, "web"))
             ["status"].get("observedGeneration") == after["metadata"]["generation"])
    await asyncio.sleep(1)
    assert {r["metadata"]["name"] for r in kube.items(path("replicasets", namespace))} == rs_before
    assert {p["metadata"]["uid"] for p in kube.items(path("pods", namespace), "app=web")} == \
        pods_before
    for pod in kube.items(path("pods", namespace), "app=web"):
        assert pod["metadata"]["labels"]["compactor.dev/policy"] == name
        assert pod["metadata"]["annotations"]["compactor.dev/intent"] == \
            after["metadata"]["annotations"]["compactor.dev/intent"]
        assert pod["spec"]["schedulerName"] == "default-scheduler"  # immutable, kept

    status = kube.get(_ccp(name))["status"]
    assert status["managedWorkloads"] == 1 and status["enabled"] is True
    assert status["schedulerName"] == "compactor-scheduler"
    conds = {c["type"]: c for c in status["conditions"]}
    assert conds["Valid"]["status"] == "True"
    assert conds["DeschedulerReady"]["reason"] == "Scheduled"
    events = [e for e in kube.items(path("events", namespace))
              if e.get("reason") == "CompactionPolicyChanged"]
    assert events and events[0]["involvedObject"]["name"] == "web"

    # A second pass changes nothing: the reconcile is idempotent.
    again = await reconciler.reconcile()
    assert (again.workloads_patched, again.pods_patched) == (0, 0)

    # No policy any more: label and annotation are removed from workload and Pods.
    kube.delete(_ccp(name))
    policies.remove(name)
    await reconciler.reconcile()
    stripped = kube.get(path("deployments", namespace, "web"))
    assert "compactor.dev/policy" not in (stripped["metadata"].get("labels") or {})
    assert "compactor.dev/intent" not in (stripped["metadata"].get("annotations") or {})
    for pod in kube.items(path("pods", namespace), "app=web"):
        assert "compactor.dev/policy" not in pod["metadata"]["labels"]


@pytest.mark.asyncio
async def test_scheduler_config_and_deployment_exist_only_while_a_policy_needs_them(
        kube: Kube, namespace: str, policies: list[str], reconciler: Reconciler) -> None:
    for other in kube.items(_ccp()):  # leftovers of other tests would keep the scheduler
        if other["metadata"]["name"] not in policies:
            kube.delete(_ccp(other["metadata"]["name"]))
    clear_waiting_on_compaction_scheduler(kube)  # so would their Pods left unbound on it
    name = _policy(policies, kube, namespace)
    await reconciler.reconcile()
    cm = kube.get(path("configmaps", "compactor-system", "compactor-scheduler-config"))
    config = yaml.safe_load(cm["data"]["config.yaml"])
    assert config["profiles"][0]["schedulerName"] == "compactor-scheduler"
    assert config["profiles"][0]["pluginConfig"][0]["args"]["scoringStrategy"]["type"] == \
        "MostAllocated"
    assert config["profiles"][0]["plugins"]["score"]["disabled"] == [
        {"name": "NodeResourcesBalancedAllocation"}, {"name": "ImageLocality"}]
    assert config["percentageOfNodesToScore"] == 100
    deploy = kube.get(path("deployments", "compactor-system", "compactor-scheduler"))
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    version = kube.get("/version")["gitVersion"]
    assert version.startswith("v1.")
    assert container["image"] == f"registry.k8s.io/kube-scheduler:{version}"
    assert deploy["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "compactor"

    kube.patch(_ccp(name), {"spec": {"scheduler": {"useManagedScheduler": False}}})
    await reconciler.reconcile()
    assert gone(kube, path("deployments", "compactor-system", "compactor-scheduler"))
    assert gone(kube, path("configmaps", "compactor-system", "compactor-scheduler-config"))
    status = kube.get(_ccp(name))["status"]
    assert status["schedulerMode"] == "descheduler-only" and status["schedulerName"] == ""


@pytest.mark.asyncio
async def test_descheduler_cronjob_is_suspended_without_workloads_and_collected_with_policy(
        cluster: Cluster, kube: Kube, namespace: str, policies: list[str],
        reconciler: Reconciler) -> None:
    name = _policy(policies, kube, namespace, {"descheduler": {
        "interval": "*/10 * * * *",
        "nodeSelector": {"matchExpressions": [{"key": "compactor.test/zone", "operator": "In",
                                               "values": ["zone-*"]}]}}})
    await reconciler.reconcile()
    cron_path = path("cronjobs", "compactor-system", f"compactor-descheduler-{name}")
    cm_path = path("configmaps", "compactor-system", f"compactor-descheduler-{name}")
    cron = kube.get(cron_path)
    assert cron["spec"]["suspend"] is True and cron["spec"]["schedule"] == "*/10 * * * *"
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"

    kube.create(path("deployments", namespace), deployment("batch", 1))
    await reconciler.reconcile()
    doc = yaml.safe_load(kube.get(cm_path)["data"]["policy.yaml"])
    assert doc["kind"] == "DeschedulerPolicy"
    selector = doc["profiles"][0]["pluginConfig"][0]["args"]["labelSelector"]
    assert {"key": "compactor.dev/policy", "operator": "In", "values": [name]} in \
        selector["matchExpressions"]
    # No node carries the zone label yet: the pool is empty. The CronJob stays suspended, the
    # status says why, and the rendered selector parses and matches nothing.
    assert kube.get(cron_path)["spec"]["suspend"] is True
    ready = kube.get(_ccp(name))["status"]["conditions"][2]
    assert (ready["status"], ready["reason"]) == ("False", "NoMatchingNodes")
    assert doc["nodeSelector"] == "compactor.test/zone,!compactor.test/zone"

    node = f"zoned-{uuid.uuid4().hex[:5]}"
    cluster.add_nodes(kube, [node], NodeShape(), labels={"compactor.test/zone": "zone-a"})
    await reconciler.reconcile()
    doc = yaml.safe_load(kube.get(cm_path)["data"]["policy.yaml"])
    assert doc["nodeSelector"] == "compactor.test/zone in (zone-a)"
    assert kube.get(cron_path)["spec"]["suspend"] is False
    assert kube.get(_ccp(name))["status"]["conditions"][2]["reason"] == "Scheduled"

    # Deleting the policy lets the garbage collector remove what it owns.
    kube.delete(_ccp(name))
    policies.remove(name)
    wait_for("CronJob collected", lambda: gone(kube, cron_path))
    wait_for("ConfigMap collected", lambda: gone(kube, cm_path))


@pytest.mark.asyncio
async def test_runtime_settings_reach_the_descheduler_pods(
        cluster: Cluster, kube: Kube, namespace: str, policies: list[str]) -> None:
    api = await Api.connect(str(cluster.kubeconfig))
    rec = Reconciler(api, load({
        "COMPACTION_DESCHEDULER_IMAGE": "mirror.local/descheduler:v0.36.0",
        "COMPACTION_DESCHEDULER_IMAGE_PULL_POLICY": "Always",
        "COMPACTION_DESCHEDULER_RESOURCES": '{"requests": {"cpu": "20m", "memory": "32Mi"}}',
        "COMPACTION_DESCHEDULER_IMAGE_PULL_SECRETS": "regcred",
        "COMPACTION_OPENSHIFT": "true"}).runtime)
    try:
        name = _policy(policies, kube, namespace)
        await rec.reconcile()
    finally:
        await api.close()
    cron = kube.get(path("cronjobs", "compactor-system", f"compactor-descheduler-{name}"))
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "mirror.local/descheduler:v0.36.0"
    assert container["imagePullPolicy"] == "Always"
    assert container["resources"] == {"requests": {"cpu": "20m", "memory": "32Mi"}}
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert "runAsUser" not in container["securityContext"]


@pytest.mark.asyncio
async def test_a_policy_the_parser_rejects_gets_valid_false_with_the_reason(
        kube: Kube, namespace: str, policies: list[str], reconciler: Reconciler) -> None:
    # Minute 61 is for the parser to catch: today's CRD refuses it too, so it is made under
    # an older one, as a policy from an earlier release would have been.
    name = f"p-{uuid.uuid4().hex[:8]}"
    admitted_by_an_older_crd(kube, "clustercompactionpolicies", None, {
        "apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
        "metadata": {"name": name}, "spec": {
            "scope": {"namespaceSelector": {"operator": "In", "values": [namespace]}},
            "descheduler": {"interval": "61 * * * *"}}})
    policies.append(name)
    summary = await reconciler.reconcile()
    assert f"ClusterCompactionPolicy/{name}" in summary.invalid
    conds = {c["type"]: c for c in kube.get(_ccp(name))["status"]["conditions"]}
    assert conds["Valid"]["status"] == "False"
    assert "spec.descheduler.interval" in conds["Valid"]["message"]
    assert "out of range 0-59" in conds["Valid"]["message"]
    assert gone(kube, path("cronjobs", "compactor-system", f"compactor-descheduler-{name}"))


def test_controller_process_reacts_to_changes_and_holds_the_lease(
        cluster: Cluster, kube: Kube, namespace: str, policies: list[str],
        tmp_path: Path) -> None:
    metrics_port = free_port()
    env = {**os.environ, "COMPACTOR_CONTROLLER_KUBECONFIG": str(cluster.kubeconfig),
           "COMPACTOR_CONTROLLER_RESYNC_SECONDS": "300", "POD_NAME": "controller-a",
           "COMPACTOR_CONTROLLER_METRICS_PORT": str(metrics_port),
           "COMPACTOR_CONTROLLER_METRICS_ADDRESS": "127.0.0.1"}
    proc = Process("compactor-controller", [sys.executable, "-m", "controller"],
                   tmp_path / "controller.log", env=env)
    proc.start()
    cluster.processes.append(proc)
    try:
        name = _policy(policies, kube, namespace)
        kube.create(path("deployments", namespace), deployment("late", 1))
        # Only the watches can have woken it: the resync is five minutes away.
        wait_for("the controller to label the Deployment", lambda: (
            kube.get(path("deployments", namespace, "late"))["metadata"].get("labels") or {}
        ).get("compactor.dev/policy") == name)
        lease = kube.get(path("leases", "compactor-system", "compactor-controller"))
        assert lease["spec"]["holderIdentity"] == "controller-a"
        text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics").text
        assert "compactor_reconcile_duration_seconds_count" in text
        assert 'compactor_runtime_evictions_total{result="pdb_blocked"}' in text
    finally:
        proc.stop()
        cluster.processes.remove(proc)
    lease = kube.get(path("leases", "compactor-system", "compactor-controller"))
    assert not lease["spec"].get("holderIdentity"), "a clean stop releases the lease"
