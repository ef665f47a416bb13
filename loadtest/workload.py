"""What `make bench` admits: owners of every kind the webhook follows, carrying an intent (one
also a resource plan), and AdmissionReview bodies of their Pods as the API server sends them."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import orjson

from compaction import names
from compaction.intent import Intent
from compaction.resource_plan import ResourcePlan
from compaction.static_policy import ContainerResources
from localcluster import Kube
from localcluster.cluster.kube import path, wait_for

INTENT = Intent("bench", {names.POLICY_LABEL: "bench"}, names.MANAGED_SCHEDULER)
ANNOTATIONS = {names.INTENT_ANNOTATION: INTENT.render()}
# One owner in six also carries a resource plan: those admissions patch container resources
# too (the namespace has no LimitRange; the plan says so).
RESOURCE_PLAN = ResourcePlan({"app": ContainerResources("app", {"cpu": "250m"},
                                                        {"memory": "512Mi"})})
PLANNED = {**ANNOTATIONS, names.RESOURCES_ANNOTATION: RESOURCE_PLAN.rendered}


def bodies(namespace: str, owners: list[dict[str, Any]], count: int, file: Path) -> Path:
    """AdmissionReview bodies as the API server sends them (a full Pod of realistic size)."""
    lines = []
    for i in range(count):
        owner = owners[i % len(owners)]
        pod = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": f"{owner['name']}-", "namespace": namespace,
                         "labels": {"app": owner["name"], "pod-template-hash": "7d9f8c6b5"},
                         "annotations": {"kubectl.kubernetes.io/restartedAt":
                                         "2026-12-01T10:00:00Z"},
                         "ownerReferences": [{**owner, "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": {"containers": [{
                "name": "app", "image": "registry.k8s.io/pause:3.10",
                "env": [{"name": f"VAR_{k}", "value": "x" * 40} for k in range(20)],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                              "limits": {"memory": "256Mi"}},
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "volumeMounts": [{"name": "kube-api-access", "readOnly": True,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
            }], "volumes": [{"name": "kube-api-access", "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}}],
                "serviceAccountName": "default", "schedulerName": names.DEFAULT_SCHEDULER,
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                 "effect": "NoExecute", "tolerationSeconds": 300}]},
        }
        lines.append(orjson.dumps({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": str(uuid.uuid4()),
                        "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "operation": "CREATE", "namespace": namespace, "object": pod,
                        "userInfo": {"username": "system:serviceaccount:kube-system:"
                                     "replicaset-controller"}}}).decode())
    file.write_text("\n".join(lines) + "\n")
    return file


def create_owners(kube: Kube, ns: str) -> list[dict[str, Any]]:
    """A Deployment's ReplicaSet, a StatefulSet and a CronJob, as the webhook meets them."""
    out = []
    for i in range(4):
        kube.create(path("deployments", ns), {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"web-{i}",
                         "annotations": PLANNED if i == 0 else ANNOTATIONS},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": f"web-{i}"}},
                     "template": {"metadata": {"labels": {"app": f"web-{i}"}},
                                  "spec": {"containers": [{"name": "c", "image": "p"}]}}}})
    rss = wait_for("replicasets", lambda: (lambda r: r if len(r) == 4 else None)(
        kube.items(path("replicasets", ns))))
    out += [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": r["metadata"]["name"],
             "uid": r["metadata"]["uid"]} for r in rss]
    sts = kube.create(path("statefulsets", ns), {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "annotations": ANNOTATIONS},
        "spec": {"replicas": 0, "serviceName": "db",
                 "selector": {"matchLabels": {"app": "db"}},
                 "template": {"metadata": {"labels": {"app": "db"}},
                              "spec": {"containers": [{"name": "c", "image": "p"}]}}}})
    cron = kube.create(path("cronjobs", ns), {
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "nightly", "annotations": ANNOTATIONS},
        "spec": {"schedule": "0 0 1 1 *", "suspend": True, "jobTemplate": {"spec": {
            "template": {"spec": {"restartPolicy": "Never",
                                  "containers": [{"name": "c", "image": "p"}]}}}}}})
    job = kube.create(path("jobs", ns), {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "nightly-1", "ownerReferences": [{
            "apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly",
            "uid": cron["metadata"]["uid"], "controller": True}]},
        "spec": {"suspend": True, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "p"}]}}}})
    out.append({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db",
                "uid": sts["metadata"]["uid"]})
    out.append({"apiVersion": "batch/v1", "kind": "Job", "name": "nightly-1",
                "uid": job["metadata"]["uid"]})
    return out
