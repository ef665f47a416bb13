"""Who may be moved, judged by the real API server, the real descheduler and the webhook process.

Descheduler eviction covers Deployment and StatefulSet Pods only (the reference's workload
table), and placeholders at priority -10 are never evicted, re-admitted or patched.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.act.metrics import ControllerMetrics
from controller.kubeapi.client import Api
from controller.process.reconciler import Reconciler
from localcluster import ApiError, Cluster, Kube
from localcluster.cluster.control_plane import MANUAL_STATUS, NodeShape
from localcluster.cluster.kube import path, wait_for
from tests.integration.conftest import Policies
from tests.integration.helpers import (
    HARNESS_PLAN,
    WEBHOOK_NAMESPACE_LABEL,
    RunningWebhook,
    descheduler_dry_run,
    evicted_in_dry_run,
    hold_running,
    install_foreign_crds,
    named_pods,
    owner_ref,
    pod_template,
    with_witness,
)

ALL_KINDS = ["Deployment", "StatefulSet", "DaemonSet", "CronJob", "Job", "Rollout",
             "AnalysisRun", "StrimziPodSet", "Model"]


def _pinned(labels: dict[str, str], node: str, cpu: str = "100m") -> dict[str, Any]:
    template = pod_template(labels, cpu)
    template["spec"]["nodeName"] = node
    return template


def _job_spec(app: str, node: str) -> dict[str, Any]:
    template = _pinned({"app": app}, node)
    template["spec"]["restartPolicy"] = "Never"
    template["metadata"]["annotations"] = {MANUAL_STATUS: "manual"}
    return {"template": template, "backoffLimit": 0}


def _create_every_kind(kube: Kube, ns: str, node: str) -> None:
    """One running Pod of each workload kind on ``node``, made as each kind's controller
    would make it (the built-in controllers really run; the foreign kinds' parts are created
    here with their owner references)."""
    sel = {"matchLabels": {"app": "deploy"}}
    kube.create(path("deployments", ns), {"apiVersion": "apps/v1", "kind": "Deployment",
                                          "metadata": {"name": "deploy"}, "spec": {
                                              "replicas": 1, "selector": sel,
                                              "template": _pinned({"app": "deploy"}, node)}})
    kube.create(path("statefulsets", ns), {"apiVersion": "apps/v1", "kind": "StatefulSet",
                                           "metadata": {"name": "sts"}, "spec": {
                                               "replicas": 1, "serviceName": "sts",
                                               "selector": {"matchLabels": {"app": "sts"}},
                                               "template": _pinned({"app": "sts"}, node)}})
    ds_template = pod_template({"app": "ds"})
    ds_template["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    kube.create(path("daemonsets", ns), {"apiVersion": "apps/v1", "kind": "DaemonSet",
                                         "metadata": {"name": "ds"}, "spec": {
                                             "selector": {"matchLabels": {"app": "ds"}},
                                             "template": ds_template}})
    cron = kube.create(path("cronjobs", ns), {
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cron"},
        "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": _job_spec("cron", node)}}})
    kube.create(path("jobs", ns), {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "cron-manual", "ownerReferences": [owner_ref(cron)]},
        "spec": _job_spec("cron", node)})
    kube.create(path("jobs", ns), {"apiVersion": "batch/v1", "kind": "Job",
                                   "metadata": {"name": "job"}, "spec": _job_spec("job", node)})
    rollout = kube.create(path("rollouts", ns), {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "metadata": {"name": "ro"},
        "spec": {"replicas": 1, "template": pod_template({"app": "ro"})}})
    kube.create(path("replicasets", ns), {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "ro-1", "ownerReferences": [owner_ref(rollout)]},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "ro"}},
                 "template": _pinned({"app": "ro"}, node)}})
    run = kube.create(path("analysisruns", ns), {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun", "metadata": {"name": "ar"},
        "spec": {"metrics": []}})
    kube.create(path("jobs", ns), {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "ar-job", "ownerReferences": [owner_ref(run)]}, "spec": _job_spec("ar", node)})
    for kind, plural, api_version, app in (
            ("StrimziPodSet", "strimzipodsets", "core.strimzi.io/v1beta2", "sps"),
            ("Model", "models", "kubeai.org/v1", "model")):
        owner = kube.create(path(plural, ns), {"apiVersion": api_version, "kind": kind,
                                               "metadata": {"name": app}, "spec": {}})
        kube.create(path("pods", ns), {"metadata": {
            "name": f"{app}-0", "labels": {"app": app}, "ownerReferences": [owner_ref(owner)]},
            "spec": _pinned({"app": app}, node)["spec"]})


def _running(kube: Kube, ns: str, count: int) -> list[dict[str, Any]] | None:
    hold_running(kube, ns)
    pods = [p for p in kube.items(path("pods", ns)) if p["status"].get("phase") == "Running"]
    return pods if len(pods) >= count else None


@pytest.mark.asyncio
async def test_descheduler_evicts_only_deployment_and_statefulset_pods_of_every_kind(
        cluster: Cluster, kube: Kube, namespace: str, workloads: Cluster,
        compaction_policies: Policies, in_process_reconciler: Reconciler,
        tmp_path: Path) -> None:
    install_foreign_crds(kube)
    pool = f"pool-{uuid.uuid4().hex[:5]}"
    # The empty node is where nodeFit finds room for the evicted Pods.
    empty, sparse = f"{pool}-empty", f"{pool}-sparse"
    cluster.add_nodes(kube, [empty, sparse], NodeShape(), labels={"compactor.test/pool": pool})
    _create_every_kind(kube, namespace, sparse)
    wait_for("a running Pod of every kind", lambda: _running(
        kube, namespace, len(ALL_KINDS)), timeout=90)

    name = compaction_policies.make(namespace, {
        "scope": {"namespaceSelector": {"operator": "In", "values": [namespace]},
                  "workloadTypes": ALL_KINDS},
        "descheduler": {
            "maxNoOfPodsToEvictPerNode": 20, "maxNoOfPodsToEvictPerNamespace": 20,
            "maxNoOfPodsToEvictTotal": 20,
            "nodeSelector": {"matchLabels": {"compactor.test/pool": pool}}}})
    summary = await in_process_reconciler.reconcile()
    assert not summary.errors, summary.errors

    # The node holds Pods the policy cannot move, so its plan does not drain it; taint it and
    # mark every Pod as a drain would, so that the kind label alone decides what is evicted.
    kube.patch(path("nodes", name=sparse), {"spec": {"taints": [{
        "key": "compactor.dev/drain", "value": name, "effect": "PreferNoSchedule"}]}})
    for p in kube.items(path("pods", namespace)):
        if p["spec"].get("nodeName") == sparse:
            kube.patch(path("pods", namespace, p["metadata"]["name"]),
                       {"metadata": {"labels": {"compactor.dev/draining": name}}})
    cm = kube.get(path("configmaps", "compactor-system", f"compactor-descheduler-{name}"))
    apps = {f"{namespace}/{p['metadata']['name']}": p["metadata"]["labels"]["app"]
            for p in kube.items(path("pods", namespace))}
    try:
        # Until its snapshot held the Pod of every kind.
        log = descheduler_dry_run(
            cluster, with_witness(yaml.safe_load(cm["data"]["policy.yaml"])), tmp_path,
            lambda text: set(apps) <= named_pods(text))
    finally:
        kube.patch(path("nodes", name=sparse), {"spec": {"taints": None}})
    planned = sorted(apps[key] for key in evicted_in_dry_run(log))
    assert planned == ["deploy", "sts"], log[-3000:]
    managed = {p["metadata"]["labels"]["app"] for p in kube.items(path("pods", namespace))
               if (p["metadata"].get("labels") or {}).get("compactor.dev/policy") == name}
    assert managed == {"deploy", "sts", "ds", "cron", "job", "ro", "ar", "sps", "model"}, \
        "the pass labels the Pods of every kind, evictable or not"

    # The Events name their object with its real apiVersion, foreign kinds included.
    events = [e for e in kube.items(path("events", namespace))
              if e.get("reason") == "CompactionPolicyChanged"]
    versions = {e["involvedObject"]["kind"]: e["involvedObject"].get("apiVersion")
                for e in events}
    assert versions == {"Deployment": "apps/v1", "StatefulSet": "apps/v1",
                        "DaemonSet": "apps/v1", "CronJob": "batch/v1", "Job": "batch/v1",
                        "Rollout": "argoproj.io/v1alpha1", "AnalysisRun": "argoproj.io/v1alpha1",
                        "StrimziPodSet": "core.strimzi.io/v1beta2", "Model": "kubeai.org/v1"}


def _placeholder_class(kube: Kube) -> None:
    """The overprovisioning document's PriorityClass, exactly."""
    try:
        kube.create(path("priorityclasses"), {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "overprovisioning"}, "value": -10, "globalDefault": False,
            "description": "Placeholder pods that hold spare capacity for real workloads."})
    except ApiError as e:
        if e.status != 409:
            raise


def _capacity_reservation(replicas: int) -> dict[str, Any]:
    """The overprovisioning document's capacity-reservation Deployment."""
    labels = {"app.kubernetes.io/name": "capacity-placeholder"}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "capacity-reservation"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"priorityClassName": "overprovisioning",
                         "terminationGracePeriodSeconds": 0,
                         "affinity": {"podAntiAffinity": {
                             "preferredDuringSchedulingIgnoredDuringExecution": [{
                                 "weight": 100, "podAffinityTerm": {
                                     "labelSelector": {"matchLabels": labels},
                                     "topologyKey": "kubernetes.io/hostname"}}]}},
                         "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9",
                                         "resources": {"requests": {"cpu": "1",
                                                                    "memory": "2Gi"}}}]}}}}


@pytest.mark.asyncio
async def test_placeholders_at_priority_minus_10_are_never_patched_readmitted_or_evicted(
        cluster: Cluster, kube: Kube, namespace: str, nodes: list[str],
        webhook: RunningWebhook, compaction_policies: Policies) -> None:
    _placeholder_class(kube)
    kube.patch(path("namespaces", name=namespace),
               {"metadata": {"labels": {WEBHOOK_NAMESPACE_LABEL: "on"}}})
    selector = "app.kubernetes.io/name=capacity-placeholder"
    kube.create(path("deployments", namespace), _capacity_reservation(2))

    def two_running() -> list[dict[str, Any]] | None:
        pods = kube.items(path("pods", namespace), selector)
        running = [p for p in pods if p["status"].get("phase") == "Running"]
        return running if len(running) == len(pods) == 2 else None
    before = wait_for("2 placeholders running", two_running)
    assert all(p["spec"]["priority"] == -10 for p in before)

    compaction_policies.make(namespace, {"setLabelsByEviction": True})
    api = await Api.connect(str(cluster.kubeconfig))
    try:
        metrics = ControllerMetrics()
        # No grace: the runtime hook would act on the first pass if it were allowed to.
        rec = Reconciler(api, replace(HARNESS_PLAN,
                                           intent_grace=datetime.timedelta(0)),
                         metrics=metrics)
        for _ in range(4):
            summary = await rec.reconcile()
            assert not summary.errors, summary.errors
            await asyncio.sleep(1)
    finally:
        await api.close()
    deploy = kube.get(path("deployments", namespace, "capacity-reservation"))
    assert "compactor.dev/intent" in deploy["metadata"]["annotations"], "the workload is managed"
    pods = kube.items(path("pods", namespace), selector)
    assert {p["metadata"]["uid"] for p in pods} == {p["metadata"]["uid"] for p in before}, \
        "no placeholder was evicted"
    for p in pods:
        assert not any(k.startswith("compactor.dev/") for k in p["metadata"].get("labels", {}))
        assert not any(k.startswith("compactor.dev/")
                       for k in p["metadata"].get("annotations") or {})
    # A new placeholder is admitted as it was written: no scheduler, no label.
    kube.patch(path("deployments", namespace, "capacity-reservation"), {"spec": {"replicas": 3}})
    fresh = wait_for("a third placeholder", lambda: [
        p for p in kube.items(path("pods", namespace), selector)
        if p["metadata"]["uid"] not in {b["metadata"]["uid"] for b in before}])
    assert fresh[0]["spec"]["schedulerName"] == "default-scheduler"
    assert "compactor.dev/policy" not in (fresh[0]["metadata"].get("labels") or {})
