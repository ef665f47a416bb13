"""The webhook as its own process, called by the real API server for Pods of real workloads."""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

import httpx
import orjson
import pytest

from compaction.intent import Intent
from localcluster import Cluster, Kube
from localcluster.cluster import scrape
from localcluster.cluster.kube import path, wait_for
from tests.integration.helpers import (
    WEBHOOK_NAMESPACE_LABEL,
    RunningWebhook,
    deployment,
    pod_template,
    pods_of,
    run_webhook,
    service_account_token,
    token_kubeconfig,
    webhook_metric,
)
from tests.unit.webhook_fakes import pod, review
from webhook.kubeapi import KubeReader
from webhook.review import OwnerRef
from webhook.server import Webhook
from webhook.settings import Settings

POLICY = "web-policy"
INTENT = Intent(POLICY, {"compactor.dev/policy": POLICY}, "compactor-scheduler")
ANNOTATIONS = {"compactor.dev/intent": INTENT.render()}
ROLLOUT_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "rollouts.argoproj.io"},
    "spec": {"group": "argoproj.io", "scope": "Namespaced",
             "names": {"kind": "Rollout", "plural": "rollouts", "singular": "rollout"},
             "versions": [{"name": "v1alpha1", "served": True, "storage": True, "schema": {
                 "openAPIV3Schema": {"type": "object",
                                     "x-kubernetes-preserve-unknown-fields": True}}}]},
}


def _assert_compacted(pods: list[dict[str, Any]], scheduler: str = "compactor-scheduler",
                      intent: Intent = INTENT) -> None:
    for p in pods:
        assert p["metadata"]["labels"]["compactor.dev/policy"] == intent.policy
        assert p["metadata"]["annotations"]["compactor.dev/intent"] == intent.render()
        assert p["spec"]["schedulerName"] == scheduler


def _owner_ref(obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
            "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}


def test_deployment_pods_get_labels_annotation_and_scheduler(
        webhook: RunningWebhook, kube: Kube, hooked_ns: str) -> None:
    kube.create(path("deployments", hooked_ns), deployment("web", 3, annotations=ANNOTATIONS))
    _assert_compacted(pods_of(kube, hooked_ns, "app=web", 3))


def test_statefulset_and_daemonset_pods_are_mutated(
        webhook: RunningWebhook, kube: Kube, hooked_ns: str, nodes: list[str]) -> None:
    labels = {"app": "db"}
    kube.create(path("statefulsets", hooked_ns), {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "annotations": ANNOTATIONS},
        "spec": {"replicas": 2, "serviceName": "db", "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": labels}, "template": pod_template(labels)}})
    labels_ds = {"app": "agent"}
    kube.create(path("daemonsets", hooked_ns), {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "annotations": ANNOTATIONS},
        "spec": {"selector": {"matchLabels": labels_ds}, "template": pod_template(labels_ds)}})
    _assert_compacted(pods_of(kube, hooked_ns, "app=db", 2))
    _assert_compacted(pods_of(kube, hooked_ns, "app=agent", len(nodes)))


def test_job_pods_use_the_jobs_own_intent(webhook: RunningWebhook, kube: Kube,
                                          hooked_ns: str) -> None:
    labels = {"app": "once"}
    kube.create(path("jobs", hooked_ns), {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "once", "annotations": ANNOTATIONS},
        "spec": {"template": {**pod_template(labels),
                              "spec": {**pod_template(labels)["spec"], "restartPolicy": "Never"}}}})
    _assert_compacted(pods_of(kube, hooked_ns, "app=once", 1))


def test_job_pods_fall_back_to_the_annotated_cronjob(webhook: RunningWebhook, kube: Kube,
                                                     hooked_ns: str) -> None:
    labels = {"app": "nightly"}
    template = {**pod_template(labels),
                "spec": {**pod_template(labels)["spec"], "restartPolicy": "Never"}}
    cron = kube.create(path("cronjobs", hooked_ns), {
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "nightly", "annotations": ANNOTATIONS},
        "spec": {"schedule": "0 0 1 1 *", "suspend": True,
                 "jobTemplate": {"spec": {"template": template}}}})
    # A Job exactly as the CronJob controller creates it: owned by the CronJob, unannotated.
    kube.create(path("jobs", hooked_ns), {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "nightly-29000000", "ownerReferences": [_owner_ref(cron)]},
        "spec": {"template": template}})
    _assert_compacted(pods_of(kube, hooked_ns, "app=nightly", 1))


def test_custom_resource_owner_argo_rollout(webhook: RunningWebhook, kube: Kube,
                                            hooked_ns: str) -> None:
    kube.apply(path("customresourcedefinitions", name="rollouts.argoproj.io"), ROLLOUT_CRD)
    api = "apis/argoproj.io/v1alpha1"
    wait_for("Rollout API served", lambda: kube.get(f"/{api}").get("resources"))
    labels = {"app": "canary"}
    rollout = kube.create(path("rollouts", hooked_ns, api=api), {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": "canary", "annotations": ANNOTATIONS},
        "spec": {"replicas": 2, "template": pod_template(labels)}})
    # The ReplicaSet the Argo controller would create for it; the real RS controller makes Pods.
    kube.create(path("replicasets", hooked_ns), {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "canary-7d9f", "ownerReferences": [_owner_ref(rollout)]},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                 "template": pod_template(labels)}})
    _assert_compacted(pods_of(kube, hooked_ns, "app=canary", 2))


def test_gpu_scheduler_is_kept_and_descheduler_only_leaves_default(
        webhook: RunningWebhook, cluster: Cluster, kube: Kube, hooked_ns: str) -> None:
    gpu = deployment("trainer", 1, annotations=ANNOTATIONS)
    gpu["spec"]["template"]["spec"]["schedulerName"] = "kai-scheduler"
    kube.create(path("deployments", hooked_ns), gpu)
    desched = Intent("quiet", {"compactor.dev/policy": "quiet"}, None)
    kube.create(path("deployments", hooked_ns),
                deployment("quiet", 1, annotations={"compactor.dev/intent": desched.render()}))
    _assert_compacted(pods_of(kube, hooked_ns, "app=trainer", 1), scheduler="kai-scheduler")
    _assert_compacted(pods_of(kube, hooked_ns, "app=quiet", 1), scheduler="default-scheduler",
                      intent=desched)
    assert webhook_metric(webhook, "compactor_gpu_scheduler_overrides_total",
                          scheduler="kai-scheduler") >= 1


def test_unannotated_and_opted_out_workloads_are_left_alone(
        webhook: RunningWebhook, kube: Kube, hooked_ns: str) -> None:
    kube.create(path("deployments", hooked_ns), deployment("plain", 1))
    ignored = deployment("ignored", 1, annotations=ANNOTATIONS)
    ignored["spec"]["template"]["metadata"]["labels"]["compactor.dev/ignore"] = "true"
    kube.create(path("deployments", hooked_ns), ignored)
    for app in ("plain", "ignored"):
        pod = pods_of(kube, hooked_ns, f"app={app}", 1)[0]
        assert "compactor.dev/policy" not in pod["metadata"]["labels"]
        assert pod["spec"]["schedulerName"] == "default-scheduler"


def _apiserver_fail_open(kube: Kube, webhook_name: str) -> float:
    """The API server's fail-open count for the webhook, summed over its other labels."""
    return scrape.value(kube.raw("/metrics").text, "apiserver_admission_webhook_fail_open_count",
                        {"name": webhook_name})


def _admission_labels(hook: RunningWebhook, namespace: str, owner: dict[str, Any]
                      ) -> dict[str, str]:
    """The labels the running webhook would add to a new Pod of ``owner`` (no Pod created)."""
    meta = owner["metadata"]
    body = review(pod(namespace, OwnerRef(owner["apiVersion"], owner["kind"], meta["name"],
                                          meta["uid"])), namespace=namespace)
    answer = httpx.post(f"{hook.url}/mutate", content=body, verify=False, timeout=5).json()
    ops = orjson.loads(base64.b64decode(answer["response"].get("patch", "W10=")))
    labels: dict[str, str] = {}
    for op in ops:
        if op["path"] == "/metadata/labels":
            labels.update(op["value"])
        elif op["path"].startswith("/metadata/labels/"):
            labels[op["path"].rsplit("/", 1)[1].replace("~1", "/")] = op["value"]
    return labels


def test_watched_owners_cost_no_api_call_and_intent_changes_arrive_before_the_ttl(
        webhook: RunningWebhook, kube: Kube, hooked_ns: str) -> None:
    kube.create(path("deployments", hooked_ns), deployment("fed", 1, annotations=ANNOTATIONS))
    pods_of(kube, hooked_ns, "app=fed", 1)
    for kind in ("ReplicaSet", "Namespace"):
        def synced(k: str = kind) -> bool:
            return webhook_metric(webhook, "compactor_owner_watch_synced", kind=k) == 1
        wait_for(f"the {kind} watch", synced)
    gets = webhook_metric(webhook, "compactor_owner_api_requests_total")
    kube.patch(path("deployments", hooked_ns, "fed"), {"spec": {"replicas": 4}})
    _assert_compacted(pods_of(kube, hooked_ns, "app=fed", 4))
    assert webhook_metric(webhook, "compactor_owner_api_requests_total") == gets

    # The watch brings the Deployment's new intent to the webhook at once, where the cache
    # alone would serve the old one for 30 s.
    other = Intent("other-policy", {"compactor.dev/policy": "other-policy"},
                   "compactor-scheduler")
    (rs,) = kube.items(path("replicasets", hooked_ns), "app=fed")
    changed = time.monotonic()
    kube.patch(path("deployments", hooked_ns, "fed"), {"metadata": {"annotations": {
        "compactor.dev/intent": other.render()}}})
    wait_for("the webhook to admit on the new intent", lambda: _admission_labels(
        webhook, hooked_ns, {"apiVersion": "apps/v1", "kind": "ReplicaSet", **rs}).get(
        "compactor.dev/policy") == "other-policy", timeout=20, interval=0.2)
    assert time.monotonic() - changed < 25
    assert webhook_metric(webhook, "compactor_owner_api_requests_total") == gets


def test_pods_are_admitted_while_the_webhook_is_down(
        cluster: Cluster, kube: Kube, namespace: str, workloads: Cluster,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    kube.patch(path("namespaces", name=namespace),
               {"metadata": {"labels": {WEBHOOK_NAMESPACE_LABEL: "down"}}})
    with run_webhook(cluster, kube, tmp_path_factory.mktemp("down"), "down") as hook:
        hook.process.stop()
        webhook_name = f"{hook.config_name}.pods.compactor.dev"

        def admitted_fail_open() -> bool:
            kube.create(path("pods", namespace), {"metadata": {"generateName": "p-"},
                        "spec": {"containers": [{"name": "c", "image": "pause"}]}})
            return _apiserver_fail_open(kube, webhook_name) > 0
        wait_for("a fail-open admission counted by the API server", admitted_fail_open,
                 interval=0.5)
    pods = kube.items(path("pods", namespace))
    assert pods and all(p["spec"]["schedulerName"] == "default-scheduler" for p in pods)


@pytest.mark.asyncio
async def test_200_concurrent_admissions_cost_one_get_per_owner_on_the_real_api(
        cluster: Cluster, kube: Kube, webhook: RunningWebhook, hooked_ns: str,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    kube.create(path("deployments", hooked_ns), deployment("burst", 1, annotations=ANNOTATIONS))
    real_pod = pods_of(kube, hooked_ns, "app=burst", 1)[0]
    token = service_account_token(kube, "compactor-system", "compactor-webhook")
    kubeconfig = token_kubeconfig(cluster, token, tmp_path_factory.mktemp("burst") / "kc")
    reader = await KubeReader.from_environment(str(kubeconfig), timeout=5)
    hook = Webhook(Settings(watch_owners=False), reader=reader)  # the cache path alone
    real_pod["metadata"].pop("labels")  # as a fresh Pod of this ReplicaSet arrives
    body = review(real_pod, namespace=hooked_ns)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=hook.app),
                                 base_url="http://w") as client:
        answers = await asyncio.gather(*(client.post("/mutate", content=body)
                                         for _ in range(200)))
    await reader.close()
    assert all("patch" in a.json()["response"] for a in answers)
    # The namespace, the ReplicaSet and the Deployment, once each: the ReplicaSet's copy of
    # the Deployment's annotations is never read for intent, so the walk goes on to the top.
    assert reader.requests == 3


HOSTILE = ["web?watch=true", "x#frag", "%2e%2e", "..", "a/b"]


def test_owner_references_cannot_steer_the_processs_requests(
        webhook: RunningWebhook, kube: Kube, hooked_ns: str) -> None:
    """Owner names and apiVersions that would have become a query, a fragment, a climb to a
    collection: the running webhook sends no request for them and counts each."""
    wait_for("the Namespace watch", lambda: webhook_metric(
        webhook, "compactor_owner_watch_synced", kind="Namespace") == 1)
    gets = webhook_metric(webhook, "compactor_owner_api_requests_total")
    invalid = webhook_metric(webhook, "compactor_owner_lookups_total", result="invalid")
    refs = [OwnerRef("apps/v1", "ReplicaSet", name, "u") for name in HOSTILE]
    refs.append(OwnerRef("apps/../v1", "ReplicaSet", "web", "u"))
    refs.append(OwnerRef("apps/v1/../../api/v1", "ReplicaSet", "web", "u"))
    for ref in refs:
        body = review(pod(hooked_ns, ref), namespace=hooked_ns)
        answer = httpx.post(f"{webhook.url}/mutate", content=body, verify=False, timeout=5)
        assert answer.status_code == 200 and "patch" not in answer.json()["response"]
    assert webhook_metric(webhook, "compactor_owner_api_requests_total") == gets
    assert webhook_metric(webhook, "compactor_owner_lookups_total",
                          result="invalid") == invalid + len(refs)


def _can(kube: Kube, verb: str, resource: str, group: str = "", namespace: str = "shop",
         subresource: str = "") -> bool:
    review = kube.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "system:serviceaccount:compactor-system:compactor-webhook",
                 "groups": ["system:serviceaccounts",
                            "system:serviceaccounts:compactor-system"],
                 "resourceAttributes": {"verb": verb, "resource": resource, "group": group,
                                        "namespace": namespace,
                                        "subresource": subresource}}})
    return bool(review["status"].get("allowed"))


@pytest.mark.parametrize(("verb", "resource", "group", "allowed"), [
    ("get", "replicasets", "apps", True), ("watch", "deployments", "apps", True),
    ("list", "cronjobs", "batch", True), ("get", "rollouts", "argoproj.io", True),
    ("get", "strimzipodsets", "core.strimzi.io", True), ("get", "models", "kubeai.org", True),
    ("get", "namespaces", "", True),
    ("get", "secrets", "", False), ("get", "pods", "", False), ("patch", "deployments", "apps",
                                                                 False),
    ("create", "pods", "", False), ("delete", "jobs", "batch", False),
    ("update", "mutatingwebhookconfigurations", "admissionregistration.k8s.io", False),
])
def test_webhook_service_account_only_reads_owner_kinds(
        webhook: RunningWebhook, kube: Kube, verb: str, resource: str, group: str,
        allowed: bool) -> None:
    assert _can(kube, verb, resource, group) is allowed
