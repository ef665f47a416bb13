"""What a bad deployment gets, on the real node: each fault below must surface as a condition, an
Event or a log line that names its cause; none may pass silently.

- No Ready webhook Pod: Pods are still admitted (``failurePolicy: Ignore``), and the API server
  says it failed open, naming the webhook and why.
- A scheduler image tag that does not exist: the policy's ``SchedulerReady`` condition and the
  controller's Event name the scheduler Pod, the kubelet's reason and the image.
- The descheduler's ServiceAccount without ``list nodes``: the run's Pod logs the refusal, its
  Job fails, and the policy's ``DeschedulerReady`` condition and an Event name the Job.

Compactor is installed with ``helm install`` (only the image values) and removed at the end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from localcluster import Kube
from localcluster.cluster import scrape
from localcluster.cluster.kube import path, wait_for
from localcluster.node.cluster import NodeCluster
from localcluster.node.install import available, kubectl
from localcluster.node.install import component_pods as pods
from tests.node.helm_release import (
    BATCH,
    NS,
    POLICIES,
    READY,
    Helm,
    condition,
    events,
    installed,
)

POLICY = "bad"
CRONJOB = f"compactor-descheduler-{POLICY}"
SHOP = "bad-shop"
WEBHOOK_NAME = "pods.compactor.dev"
MISSING_TAG = "v0.0.0-missing"
# The descheduler's Job as the CronJob makes it waits 600 s (activeDeadlineSeconds) for a run
# that cannot list nodes; the Job made by hand here waits this long instead.
DEADLINE = 45
OWN_LABELS = {"team": "platform"}


@pytest.fixture(scope="module")
def release(node: NodeCluster, kube: Kube,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helm]:
    # The install namespace made beforehand, as a cluster's owner may: the chart must leave
    # its labels alone.
    kube.ensure_namespace(NS, dict(OWN_LABELS))
    try:
        with installed(node.cluster, kube, tmp_path_factory.mktemp("helm-home")) as helm:
            kube.ensure_namespace(SHOP, default_service_account=True)
            yield helm
    finally:
        kube.delete(path("namespaces", name=SHOP))
        wait_for(f"namespace {SHOP} gone", lambda: kube.find(
            path("namespaces", name=SHOP)) is None or None, READY, 1.0)


def test_the_chart_never_labels_a_namespace_that_was_there(kube: Kube, release: Helm) -> None:
    meta = kube.get(path("namespaces", name=NS))["metadata"]
    labels = dict(meta["labels"])
    # Helm's own --create-namespace applies a label "name", to a namespace that exists too.
    assert labels.pop("name", NS) == NS
    assert labels == {**OWN_LABELS, "kubernetes.io/metadata.name": NS}
    assert "meta.helm.sh/release-name" not in (meta.get("annotations") or {})


def _apiserver_log(node: NodeCluster) -> str:
    (proc,) = [p for p in node.cluster.processes if p.name == "kube-apiserver"]
    return proc.log.read_text(errors="replace")


def _fail_open(kube: Kube) -> float:
    return scrape.value(kube.raw("/metrics").text, "apiserver_admission_webhook_fail_open_count",
                        {"name": WEBHOOK_NAME})


def _bare_pod() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "bare-"},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10.2"}]}}


def test_without_a_ready_webhook_pod_pods_are_admitted_and_the_api_server_says_it_failed_open(
        node: NodeCluster, kube: Kube, release: Helm) -> None:
    kubectl(node.cluster, "scale", "deployment/compactor-webhook", "-n", NS, "--replicas=0")
    wait_for("no webhook Pod", lambda: not pods(kube, "webhook") or None, READY, 1.0)
    before, logged = _fail_open(kube), len(_apiserver_log(node))
    try:
        admitted = kube.create(path("pods", SHOP), _bare_pod(), dry_run=True)
        assert admitted["metadata"]["name"].startswith("bare-")
        assert admitted["spec"]["schedulerName"] == "default-scheduler"  # unchanged
        # The API server's count of calls it failed open, and its log line naming the webhook
        # and the cause.
        assert _fail_open(kube) == before + 1
        lines = [line for line in _apiserver_log(node)[logged:].splitlines()
                 if "failing open" in line and WEBHOOK_NAME in line]
        assert lines and "no endpoints available for service" in lines[0], lines
        print("the API server's log:\n" + lines[0])
    finally:
        kubectl(node.cluster, "scale", "deployment/compactor-webhook", "-n", NS,
                "--replicas=2")
        wait_for("the webhook's two replicas available again",
                 lambda: available(kube, "compactor-webhook", 2), READY, 1.0)

    # Ready again: called and answered (once the API server sees the Service's endpoints).
    def answered() -> bool | None:
        count = _fail_open(kube)
        kube.create(path("pods", SHOP), _bare_pod(), dry_run=True)
        return _fail_open(kube) == count or None
    wait_for("an admission the webhook answers", answered, READY, 1.0)


def _policy_condition(kube: Kube, kind: str) -> dict[str, Any]:
    found = kube.find(path("clustercompactionpolicies", name=POLICY, api=POLICIES))
    return condition(found or {}, kind)


def _set_env(node: NodeCluster, kube: Kube, assignment: str) -> None:
    """``kubectl set env`` on the controller, until its rollout is done."""
    kubectl(node.cluster, "set", "env", "deployment/compactor-controller", "-n", NS, assignment)
    wait_for("the controller rolled out", lambda: available(kube, "compactor-controller", 2),
             READY, 1.0)


def test_a_scheduler_image_that_cannot_be_pulled_is_named_in_the_policys_status(
        node: NodeCluster, kube: Kube, release: Helm) -> None:
    _set_env(node, kube, f"COMPACTION_SCHEDULER_IMAGE_TAG={MISSING_TAG}")
    kube.apply(path("clustercompactionpolicies", name=POLICY, api=POLICIES), {
        "apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
        "metadata": {"name": POLICY},
        "spec": {"scope": {"namespaceSelector": {"operator": "In", "values": [SHOP]}}}})
    try:
        def stuck() -> dict[str, Any] | None:
            for pod in pods(kube, "scheduler"):
                for s in pod["status"].get("containerStatuses") or []:
                    reason = s["state"].get("waiting", {}).get("reason")
                    if reason in ("ErrImagePull", "ImagePullBackOff"):
                        return pod
            return None
        pod = wait_for("the scheduler Pod failing to pull its image", stuck, READY, 1.0)
        assert pod["spec"]["containers"][0]["image"].endswith(f":{MISSING_TAG}")
        name = pod["metadata"]["name"]

        def named() -> dict[str, Any] | None:
            c = _policy_condition(kube, "SchedulerReady")
            return c if c.get("reason") == "Unavailable" and \
                f"Pod {name} cannot start: " in c.get("message", "") else None
        cond = wait_for("SchedulerReady naming the Pod that cannot start", named, READY, 1.0)
        assert cond["status"] == "False"
        assert "ImagePull" in cond["message"] and MISSING_TAG in cond["message"], cond
        print(f"SchedulerReady: {cond['message']}")
        (event,) = wait_for("the controller's Event on the scheduler", lambda: [
            e for e in events(kube, NS, "compactor-scheduler")
            if e["reason"] == "CompactionSchedulerUnavailable"], READY, 1.0)
        assert event["type"] == "Warning" and MISSING_TAG in event["message"], event
        # The kubelet's own Event on the Pod names the image too.
        assert any(MISSING_TAG in e["message"] for e in events(kube, NS, name)
                   if e["reason"] in ("Failed", "BackOff"))
    finally:
        _set_env(node, kube, "COMPACTION_SCHEDULER_IMAGE_TAG-")
    wait_for("the scheduler available with its image", lambda: available(
        kube, "compactor-scheduler", 1), READY, 1.0)
    wait_for("SchedulerReady again", lambda: _policy_condition(kube, "SchedulerReady").get(
        "status") == "True" or None, READY, 1.0)


def _descheduler_rules(kube: Kube) -> list[dict[str, Any]]:
    role = kube.get(path("clusterroles", name="compactor-descheduler",
                         api="apis/rbac.authorization.k8s.io/v1"))
    return list(role["rules"])


def _set_rules(kube: Kube, rules: list[dict[str, Any]]) -> None:
    kube.patch(path("clusterroles", name="compactor-descheduler",
                    api="apis/rbac.authorization.k8s.io/v1"), {"rules": rules})


def _job(kube: Kube, name: str) -> dict[str, Any] | None:
    return kube.find(path("jobs", NS, name, api=BATCH))


def test_a_descheduler_run_without_a_permission_fails_and_says_which(
        node: NodeCluster, kube: Kube, release: Helm) -> None:
    wait_for("the policy's CronJob", lambda: kube.find(
        path("cronjobs", NS, CRONJOB, api=BATCH)), READY, 1.0)
    rules = _descheduler_rules(kube)
    without = [{**r, "resources": [x for x in r["resources"] if x != "nodes"]} for r in rules]
    assert without != rules
    _set_rules(kube, without)
    try:
        # As an operator would (kubectl create job --from), with a shorter deadline.
        job = json.loads(kubectl(node.cluster, "create", "job", f"--from=cronjob/{CRONJOB}",
                                 "no-nodes", "-n", NS, "--dry-run=client", "-o", "json").stdout)
        job["spec"]["activeDeadlineSeconds"] = DEADLINE
        kube.create(path("jobs", NS, api=BATCH), job)

        def refused() -> str | None:
            found = kube.items(path("pods", NS), "job-name=no-nodes")
            if not found or not found[0]["status"].get("containerStatuses"):
                return None
            log = kube.raw(path("pods", NS, found[0]["metadata"]["name"], sub="log")).text
            return next((line for line in log.splitlines()
                         if 'cannot list resource \\"nodes\\"' in line
                         or 'cannot list resource "nodes"' in line), None)
        line = wait_for("the run's log naming the refused permission", refused, READY, 1.0)
        assert "system:serviceaccount:compactor-system:compactor-descheduler" in line
        print(f"the descheduler's log: {line}")

        def failed() -> dict[str, Any] | None:
            c = condition(_job(kube, "no-nodes") or {}, "Failed")
            return c if c.get("status") == "True" else None
        # The run waits for a node list that never comes, until the Job's deadline.
        reason = wait_for("the Job Failed", failed, READY, 1.0)["reason"]
        assert reason in ("DeadlineExceeded", "BackoffLimitExceeded")

        def said() -> dict[str, Any] | None:
            c = _policy_condition(kube, "DeschedulerReady")
            return c if c.get("reason") == "RunFailed" else None
        cond = wait_for("DeschedulerReady saying the run failed", said, READY, 1.0)
        assert cond["status"] == "False"
        assert f"Job {NS}/no-nodes, failed: {reason}" in cond["message"]
        assert f"kubectl logs -n {NS} job/no-nodes" in cond["message"]
        (event,) = wait_for("the controller's Event on the CronJob", lambda: [
            e for e in events(kube, NS, CRONJOB) if e["reason"] == "DeschedulerRunFailed"],
            READY, 1.0)
        assert event["type"] == "Warning" and "no-nodes" in event["message"]
    finally:
        _set_rules(kube, rules)
    # With the permission back, a run succeeds and the condition clears.
    kubectl(node.cluster, "create", "job", f"--from=cronjob/{CRONJOB}", "with-nodes", "-n", NS)
    wait_for("the next run complete", lambda: condition(_job(kube, "with-nodes") or {},
                                                        "Complete").get("status") == "True"
             or None, READY, 1.0)
    wait_for("DeschedulerReady no longer RunFailed", lambda: _policy_condition(
        kube, "DeschedulerReady").get("reason") not in (None, "RunFailed") or None, READY, 1.0)
