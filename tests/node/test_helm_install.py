"""Compactor installed with ``helm install`` on the real node, only the image values set (the
install guide's command), into a release namespace other than compactor-system: the webhook and
controller run from Compactor's image, the API server calls the webhook through its Service
there, and a policy makes the controller run the compaction scheduler there, which binds a
workload Pod to a kwok node. ``helm uninstall`` and the guide's cleanup end the module, so the
next one starts on a clean cluster.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography import x509

from localcluster import Kube
from localcluster.cluster import scrape
from localcluster.cluster.kube import path, wait_for
from localcluster.node import containerd, install
from localcluster.node.cluster import KWOK_TOLERATION, NodeCluster
from localcluster.node.install import kubectl, leader_metrics, seconds_to_ready
from tests.node import hardening
from tests.node.conftest import image
from tests.node.helm_release import (
    APPS,
    BATCH,
    POLICIES,
    READY,
    Helm,
    compactor_image,
    condition,
    installed,
)

POLICY = "helm"
SHOP = "helm-shop"  # selected by the policy
KWOK = ["helm-kwok-1", "helm-kwok-2"]
POOL = {"compactor.test/pool": "helm"}
WEBHOOK_NAME = "pods.compactor.dev"
# Any release namespace: everything the chart renders and the controller creates follows it.
NS = "compactor-helm"


def pods(kube: Kube, component: str) -> list[dict[str, Any]]:
    return install.component_pods(kube, component, NS)


def digests(node: NodeCluster) -> dict[str, str]:
    """The digest of each image the release runs, as the node's containerd holds it."""
    return {"compactor": hardening.digest(node, compactor_image()),
            "kube-scheduler": hardening.digest(node, image("kube-scheduler")),
            "descheduler": hardening.digest(node, image("descheduler"))}


@pytest.fixture(scope="module")
def release(node: NodeCluster, kube: Kube,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helm]:
    # Every image pinned by digest, as docs/install.md shows.
    d = digests(node)
    pinned = (f"image.digest={d['compactor']}",
              f"compactionScheduler.image.digest={d['kube-scheduler']}",
              f"descheduler.digest={d['descheduler']}")
    try:
        with installed(node.cluster, kube, tmp_path_factory.mktemp("helm-home"), NS,
                       pinned) as helm:
            yield helm
    finally:
        kube.delete(path("namespaces", name=SHOP))
        for name in KWOK:
            kube.delete(path("nodes", name=name))
        wait_for(f"namespace {SHOP} gone", lambda: kube.find(
            path("namespaces", name=SHOP)) is None or None, READY, 1.0)
        assert kube.find(path("mutatingwebhookconfigurations", name="compactor-webhook")) \
            is None


def test_both_webhook_replicas_become_ready_through_their_probes(
        node: NodeCluster, kube: Kube, release: Helm) -> None:
    found = pods(kube, "webhook")
    assert len(found) == 2
    for pod in found:
        assert pod["spec"]["nodeName"] == node.name
        (container,) = pod["spec"]["containers"]
        assert container["image"] == \
            f"{compactor_image().rsplit(':', 1)[0]}@{digests(node)['compactor']}"
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        (status,) = pod["status"]["containerStatuses"]
        assert status["ready"] and status["restartCount"] == 0, pod["status"]
        print(f"{pod['metadata']['name']}: creation to Ready {seconds_to_ready(pod)} s")


def test_the_controllers_replicas_elect_one_leader(
        node: NodeCluster, kube: Kube, release: Helm) -> None:
    found = pods(kube, "controller")
    names = {p["metadata"]["name"] for p in found}
    assert len(names) == 2 and all(p["spec"]["nodeName"] == node.name for p in found)
    leader = wait_for("a holder of the controller's Lease", lambda: install.lease_holder(kube, NS),
                      READY, 1.0)
    assert leader in names

    def leaders() -> dict[str, float] | None:
        seen = leader_metrics(found)
        return seen if sum(seen.values()) == 1 else None
    # Each replica's own view: the holder leads, the other stands by.
    assert wait_for("one leader by the replicas' metrics", leaders, 60.0, 1.0) == {
        n: 1.0 if n == leader else 0.0 for n in names}


def test_the_controller_issues_the_tls_secret_and_injects_the_ca_bundle(
        kube: Kube, release: Helm) -> None:
    def issued() -> dict[str, bytes] | None:
        found = kube.find(path("secrets", NS, "compactor-webhook-tls"))
        data = (found or {}).get("data") or {}
        return {k: base64.b64decode(v) for k, v in data.items()} or None
    tls = wait_for("the webhook's TLS Secret", issued, READY, 1.0)
    assert set(tls) == {"ca.crt", "ca.key", "tls.crt", "tls.key", "ca-bundle.crt"}
    (hook,) = kube.get(path("mutatingwebhookconfigurations", name="compactor-webhook"))[
        "webhooks"]
    assert hook["clientConfig"]["service"] == {"name": "compactor-webhook", "namespace": NS,
                                               "path": "/mutate", "port": 443}
    assert base64.b64decode(hook["clientConfig"]["caBundle"]) == tls["ca-bundle.crt"]
    assert hook["failurePolicy"] == "Ignore"
    # The serving certificate names the Service in the release namespace, and the webhook
    # configuration leaves that namespace's Pods alone.
    served = x509.load_pem_x509_certificate(tls["tls.crt"])
    assert f"compactor-webhook.{NS}.svc" in served.extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    (excluded,) = [e for e in hook["namespaceSelector"]["matchExpressions"]
                   if e["key"] == "kubernetes.io/metadata.name"]
    assert excluded == {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                        "values": ["kube-system", NS]}


def test_the_charts_network_policies_are_in_the_release_namespace(
        kube: Kube, release: Helm) -> None:
    found = kube.items(path("networkpolicies", NS, api="apis/networking.k8s.io/v1"))
    assert {p["metadata"]["name"] for p in found} == {
        f"compactor-{c}" for c in ("webhook", "controller", "scheduler", "descheduler")}


@pytest.fixture(scope="module")
def workload(node: NodeCluster, kube: Kube, release: Helm) -> tuple[dict[str, Any], str]:
    """A ClusterCompactionPolicy for ``helm-shop`` on the kwok pool, Deployment ``web`` there
    with no replicas yet once the controller has written its intent (the compaction scheduler's,
    so the scheduler is available), and web's ReplicaSet."""
    kube.ensure_namespace(SHOP, default_service_account=True)
    node.add_kwok_nodes(KWOK, labels=POOL)
    kube.apply(path("clustercompactionpolicies", name=POLICY, api=POLICIES), {
        "apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
        "metadata": {"name": POLICY},
        "spec": {"scope": {"namespaceSelector": {"operator": "In", "values": [SHOP]}},
                 "descheduler": {"nodeSelector": {"matchLabels": POOL}}}})
    labels = {"app": "web"}
    kube.create(path("deployments", SHOP, api=APPS), {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     "tolerations": [KWOK_TOLERATION], "nodeSelector": POOL,
                     "containers": [{"name": "app", "image": containerd.SANDBOX_IMAGE,
                                     "resources": {"requests": {"cpu": "100m",
                                                                "memory": "64Mi"}}}]}}}})

    def intent() -> str | None:
        found = kube.get(path("deployments", SHOP, "web", api=APPS))
        text = (found["metadata"].get("annotations") or {}).get("compactor.dev/intent")
        return text if text and json.loads(text).get("schedulerName") == \
            "compactor-scheduler" else None
    written = wait_for("web's intent naming compactor-scheduler", intent, READY, 1.0)
    rs = wait_for("web's ReplicaSet", lambda: next(iter(kube.items(
        path("replicasets", SHOP, api=APPS), "app=web")), None), READY, 1.0)
    return rs, written


def mutated(pod: dict[str, Any], intent: str) -> bool:
    labels = pod["metadata"].get("labels") or {}
    return (pod["spec"].get("schedulerName") == "compactor-scheduler"
            and labels.get("compactor.dev/policy") == POLICY
            and (pod["metadata"].get("annotations") or {}).get("compactor.dev/intent") == intent)


def test_a_policy_makes_the_controller_run_the_scheduler_on_the_real_node(
        node: NodeCluster, kube: Kube, workload: tuple[dict[str, Any], str]) -> None:
    deployment = wait_for("the compaction scheduler available",
                          lambda: install.available(kube, "compactor-scheduler", 1, NS),
                          READY, 1.0)
    images = {c["name"]: c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert images.keys() == {"kube-scheduler", "extender"}, images
    assert images["kube-scheduler"] == \
        f"registry.k8s.io/kube-scheduler@{digests(node)['kube-scheduler']}"
    # The extender beside it runs the chart's image of Compactor, the controller's own.
    (controller,) = kube.get(path("deployments", NS, "compactor-controller"))["spec"][
        "template"]["spec"]["containers"]
    assert images["extender"] == controller["image"]
    (pod,) = pods(kube, "scheduler")
    assert pod["spec"]["nodeName"] == node.name
    assert all(s["ready"] for s in pod["status"]["containerStatuses"]), pod["status"]

    def reported() -> dict[str, Any] | None:
        """The policy's SchedulerReady, once a pass has seen the Deployment available (the
        controller reads its own objects at each resync, 30 s)."""
        policy = kube.get(path("clustercompactionpolicies", name=POLICY, api=POLICIES))
        ready = condition(policy, "SchedulerReady")
        return ready if ready.get("reason") == "Available" else None
    try:
        ready = wait_for("SchedulerReady Available", reported, READY, 1.0)
    except TimeoutError as e:
        policy = kube.get(path("clustercompactionpolicies", name=POLICY, api=POLICIES))
        logs = kubectl(node.cluster, "logs", "-n", NS, "deployment/compactor-controller",
                       "--tail=40", check=False)
        raise TimeoutError(f"{e}\nthe policy's status: {policy.get('status')}\nthe "
                           f"controller's log:\n{logs.stdout}{logs.stderr}") from e
    assert ready["status"] == "True"


def test_the_api_server_calls_the_webhook_through_its_service(
        kube: Kube, workload: tuple[dict[str, Any], str]) -> None:
    """A server-side dry-run creation of web's Pod: the API server runs admission, the webhook
    among it, and answers with the Pod it would store, mutated."""
    rs, intent = workload
    calls = {"name": WEBHOOK_NAME, "code": "200"}
    before = scrape.value(kube.raw("/metrics").text,
                          "apiserver_admission_webhook_request_total", calls)
    meta = rs["metadata"]
    pod = kube.create(path("pods", SHOP), {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "web-", "labels": {"app": "web"}, "ownerReferences": [{
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
        "spec": rs["spec"]["template"]["spec"]}, dry_run=True)
    assert mutated(pod, intent), pod["metadata"]
    # The API server's own count of calls answered HTTP 200 (not failed open).
    assert scrape.value(kube.raw("/metrics").text, "apiserver_admission_webhook_request_total",
                        calls) > before


def test_the_scheduler_binds_a_workload_pod_to_a_kwok_node(
        kube: Kube, workload: tuple[dict[str, Any], str]) -> None:
    _, intent = workload
    kube.patch(path("deployments", SHOP, "web", api=APPS), {"spec": {"replicas": 1}})
    (pod,) = wait_for("web's Pod bound", lambda: [
        p for p in kube.items(path("pods", SHOP), "app=web") if p["spec"].get("nodeName")],
        READY, 1.0)
    assert mutated(pod, intent) and pod["spec"]["nodeName"] in KWOK
    events = kube.items(path("events", SHOP, api="apis/events.k8s.io/v1"))
    assert [e["reportingController"] for e in events if e.get("reason") == "Scheduled"
            and e["regarding"]["name"] == pod["metadata"]["name"]] == ["compactor-scheduler"]


def test_the_chart_labels_the_namespace_it_creates_and_every_part_runs_there_pinned(
        node: NodeCluster, kube: Kube, release: Helm,
        workload: tuple[dict[str, Any], str]) -> None:
    """``helm install --create-namespace``: the chart labels the namespace it creates as
    deploy/ does (the restricted profile enforced: a Pod breaking it is refused) and keeps it on
    uninstall. Every part runs there from an image pinned by digest, a descheduler run made by
    hand from the policy's CronJob included, none refused, each with the projected token of an
    hour and not the kubelet's."""
    meta = kube.get(path("namespaces", name=NS))["metadata"]
    assert meta["labels"][hardening.RESTRICTED] == "restricted"
    assert meta["labels"]["compactor.dev/ignore"] == "true"
    assert meta["annotations"]["meta.helm.sh/release-name"] == "compactor"
    assert meta["annotations"]["helm.sh/resource-policy"] == "keep"
    assert 'violates PodSecurity "restricted:latest"' in hardening.refused_by_the_profile(
        kube, NS)
    cronjob = f"compactor-descheduler-{POLICY}"
    wait_for("the policy's CronJob", lambda: kube.find(path("cronjobs", NS, cronjob, api=BATCH)),
             READY, 1.0)
    kubectl(node.cluster, "create", "job", f"--from=cronjob/{cronjob}", "by-hand", "-n", NS)
    wait_for("the run by hand complete", lambda: condition(kube.find(path(
        "jobs", NS, "by-hand", api=BATCH)) or {}, "Complete").get("status") == "True" or None,
        READY, 1.0)
    d = digests(node)
    expected = {"webhook": f"{compactor_image().rsplit(':', 1)[0]}@{d['compactor']}",
                "controller": f"{compactor_image().rsplit(':', 1)[0]}@{d['compactor']}",
                "scheduler": f"registry.k8s.io/kube-scheduler@{d['kube-scheduler']}",
                "descheduler": f"registry.k8s.io/descheduler/descheduler@{d['descheduler']}"}
    found = {c: pods(kube, c) for c in expected}
    assert {c: {p["spec"]["containers"][0]["image"] for p in ps} for c, ps in found.items()} \
        == {c: {i} for c, i in expected.items()}
    assert hardening.failed_creations(kube, NS) == []
    hardening.check_tokens(node, kube, NS, [p for ps in found.values() for p in ps])
