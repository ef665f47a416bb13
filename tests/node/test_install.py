"""Compactor installed as its users install it, on the real node, in a namespace of their own
choosing: an overlay of an unchanged copy of deploy/ that sets the namespace and the image
(``kustomize create --namespace``, ``kustomize edit set image``), applied with
``kubectl apply --server-side -k``. (deploy/ itself, in compactor-system, is what
test_compaction_from_images.py installs.)

Every Compactor Pod runs from the image built from the Dockerfile: the webhook and the
controller from the manifests, the compaction scheduler and a descheduler Job from what the
controller writes. The API server calls the webhook through its Service. The figures for the
install guide (image size, time to Ready, admission latency through the Service, memory) are
collected on the way and reported at the end; the machine is shared, so they are loaded-run
figures unless the run was alone.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import json
import re
import socket
import ssl
import statistics
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from localcluster import Kube
from localcluster.cluster import scrape
from localcluster.cluster.kube import ApiError, path, wait_for
from localcluster.node import containerd, install, kube_router, kubelet
from localcluster.node.cluster import KWOK_TOLERATION, SERVICE_IP, NodeCluster
from tests.node import hardening, network_policies
from tests.node.conftest import image, images

# Not compactor-system: everything must follow the overlay's namespace.
NS = "compactor-ops"
APPS = "apis/apps/v1"
POLICIES = "apis/compactor.dev/v1alpha1"
POLICY = "install"
CRONJOB = f"compactor-descheduler-{POLICY}"
SHOP = "shop"  # selected by the policy
QUIET = "quiet"  # excluded from the webhook (compactor.dev/ignore), to time admissions without it
KWOK = ["install-kwok-1", "install-kwok-2"]
VAP_NODE = "install-vap"  # a kwok node for the admission policies' test, in no pool
POOL = {"compactor.test/pool": "install"}
WEBHOOK_NAME = "pods.compactor.dev"
SERVICE_NAME = f"compactor-webhook.{NS}.svc"
# Two shared cores, other real-node runs beside this one: minutes, not seconds.
READY = 300.0


@dataclass
class Installed:
    directory: Path
    image: str  # as the manifests name it: by digest
    tag: str  # as tools/build-images.sh tagged it
    figures: dict[str, Any] = field(default_factory=dict)


def pods(kube: Kube, component: str) -> list[dict[str, Any]]:
    return install.component_pods(kube, component, NS)


def available(kube: Kube, name: str, replicas: int) -> dict[str, Any] | None:
    return install.available(kube, name, replicas, NS)


def ready(pod: dict[str, Any]) -> bool:
    return install.seconds_to_ready(pod) is not None


def secret(kube: Kube) -> dict[str, bytes]:
    found = kube.get(path("secrets", NS, "compactor-webhook-tls"))
    return {k: base64.b64decode(v) for k, v in found["data"].items()}


def der(pem: bytes) -> bytes:
    return x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER)


def served(ip: str) -> bytes | None:
    """The certificate the webhook at ``ip`` serves now (DER), or None if it does not answer."""
    tls = ssl.create_default_context()
    tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE
    try:
        with socket.create_connection((ip, 8443), timeout=3) as raw, \
                tls.wrap_socket(raw) as conn:
            return conn.getpeercert(binary_form=True)
    except OSError:
        return None


def webhook_metrics(kube: Kube) -> list[str]:
    """Each webhook Pod's /metrics, read at its own address."""
    return [httpx.get(f"https://{p['status']['podIP']}:8443/metrics", verify=False,
                      timeout=10).text for p in pods(kube, "webhook")]


def webhook_answers(kube: Kube) -> dict[str, float]:
    """The webhook's own count of its answers, by outcome and by fail-open reason, over its
    Pods."""
    counts: dict[str, float] = {}
    for text in webhook_metrics(kube):
        for line in text.splitlines():
            if line.startswith(("compactor_admission_requests_total{",
                                "compactor_admission_failed_open_total{")):
                series, value = line.rsplit(" ", 1)
                counts[series] = counts.get(series, 0.0) + float(value)
    return counts


def apiserver_metrics(kube: Kube) -> str:
    return kube.raw("/metrics").text


def admit(kube: Kube, rs: dict[str, Any], namespace: str = SHOP) -> dict[str, Any]:
    """A server-side dry-run creation of a Pod of ``rs``: the API server runs admission (the
    webhook among it) and answers with the Pod it would store."""
    meta = rs["metadata"]
    return kube.create(path("pods", namespace), {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": f"{meta['name']}-", "labels": {"app": "web"},
                     "ownerReferences": [{
                         "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": meta["name"],
                         "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
        "spec": rs["spec"]["template"]["spec"],
    }, dry_run=True)


def mutated(pod: dict[str, Any], intent: str) -> bool:
    labels = pod["metadata"].get("labels") or {}
    return (pod["spec"].get("schedulerName") == "compactor-scheduler"
            and labels.get("compactor.dev/policy") == POLICY
            and labels.get("compactor.dev/workload-kind") == "Deployment"
            and (pod["metadata"].get("annotations") or {}).get("compactor.dev/intent") == intent)


def web(replicas: int) -> dict[str, Any]:
    """A workload for kwok nodes: it tolerates their taint and selects their pool."""
    labels = {"app": "web"}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     "tolerations": [KWOK_TOLERATION], "nodeSelector": POOL,
                     "containers": [{"name": "app", "image": containerd.SANDBOX_IMAGE,
                                     "resources": {"requests": {"cpu": "100m",
                                                                "memory": "64Mi"}}}]}}},
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# --- the install --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def installed(node: NodeCluster, kube: Kube, tmp_path_factory: pytest.TempPathFactory,
              request: pytest.FixtureRequest) -> Iterator[Installed]:
    tag = image("compactor")
    # Pinned by digest, as docs/install.md says: the node resolves it as a registry would.
    pinned = f"{tag.rsplit(':', 1)[0]}@{hardening.digest(node, tag)}"
    directory = install.kustomization(pinned, tmp_path_factory.mktemp("install"), NS)
    done = Installed(directory, pinned, tag)
    started = time.monotonic()
    install.apply(node.cluster, directory)
    try:
        install.wait_available(kube, READY, NS)
        done.figures["apply to both Deployments available (s)"] = round(
            time.monotonic() - started, 1)
        yield done
    finally:
        _report(done.figures, request)
        _uninstall(node, kube, directory)


def _uninstall(node: NodeCluster, kube: Kube, directory: Path) -> None:
    """Everything this module made goes, so the next module starts on a clean cluster: the
    policy first (the controller removes its scheduler, garbage collection its CronJob), the
    workload namespaces, the kwok nodes, then ``kubectl delete -k``."""
    kube.delete(path("clustercompactionpolicies", name=POLICY, api=POLICIES))
    for ns in (SHOP, QUIET):
        kube.delete(path("namespaces", name=ns))
    for name in KWOK:
        kube.delete(path("nodes", name=name))
    install.uninstall(node.cluster, directory)
    for ns in (SHOP, QUIET, NS):
        wait_for(f"namespace {ns} gone", functools.partial(
            _gone, kube, path("namespaces", name=ns)), READY, 1.0)
    assert kube.find(path("mutatingwebhookconfigurations", name="compactor-webhook")) is None


def _gone(kube: Kube, url: str) -> bool | None:
    return True if kube.find(url) is None else None


def _report(figures: dict[str, Any], request: pytest.FixtureRequest) -> None:
    text = json.dumps(figures, indent=1, default=str)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("\nCompactor installed with kustomize on the real node:\n" + text)
    print(text)


# --- the tests, in the order an operator would see things happen ----------------------------


def test_the_overlay_changes_only_the_namespace_and_the_image(
        node: NodeCluster, installed: Installed) -> None:
    overlay = installed.directory
    copied = overlay.parent / "deploy"
    assert [p.relative_to(copied) for p in copied.rglob("*") if p.is_file()
            and p.read_bytes() != (install.DEPLOY / p.relative_to(copied)).read_bytes()] == []
    assert [p.name for p in overlay.iterdir()] == ["kustomization.yaml"]
    # What kustomize renders differs in the namespace and the image alone. Every namespace
    # follows the overlay's: the Namespace itself, each role's ServiceAccount subject, the
    # webhook configuration's Service; the admission policies name no account (their parameter
    # is the controller's ClusterRoleBinding). One mention stays: compactor-system among the
    # namespaces the webhook configuration excludes. The overlay's own namespace is excluded
    # there by its compactor.dev/ignore label, and the webhook skips its own namespace's Pods.
    ours, theirs = (install.kubectl(node.cluster, "kustomize", str(d)).stdout
                    for d in (overlay, install.DEPLOY))
    assert ours.count(f"image: {installed.image}") == 2
    kept = "      - kube-system\n      - compactor-system\n"
    assert theirs.count(kept) == 1 and ours.count(kept) == 1
    before, after = theirs.split(kept)
    expected = list(yaml.safe_load_all(kept.join(
        part.replace("image: compactor:0.1.0", f"image: {installed.image}")
        .replace("compactor-system", NS) for part in (before, after))))
    rendered = list(yaml.safe_load_all(ours))
    # kustomize's schema does not know the admission policies are cluster-scoped, so it gives
    # them the overlay's namespace too; the API server drops it (below).
    for d in rendered:
        if d["kind"] in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
            assert d["metadata"].pop("namespace") == NS
    assert rendered == expected
    for kind in ("validatingadmissionpolicies", "validatingadmissionpolicybindings"):
        stored = install.kubectl(node.cluster, "get", kind, "-o", "json").stdout
        assert {i["metadata"]["name"]: i["metadata"].get("namespace")
                for i in json.loads(stored)["items"]} == {
            "compactor-controller-node-drain-taint-only": None,
            "compactor-controller-pod-metadata-only": None}
    namespace = next(d for d in rendered if d["kind"] == "Namespace")
    assert namespace["metadata"]["name"] == NS
    assert namespace["metadata"]["labels"]["compactor.dev/ignore"] == "true"


def test_both_webhook_replicas_become_ready_through_their_probes(
        node: NodeCluster, kube: Kube, installed: Installed) -> None:
    found = pods(kube, "webhook")
    assert len(found) == 2
    ca = secret(kube)["ca-bundle.crt"]
    tls = ssl.create_default_context(cadata=ca.decode())
    for pod in found:
        assert pod["spec"]["nodeName"] == node.name
        (container,) = pod["spec"]["containers"]
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container["image"] == installed.image
        assert ready(pod), pod["status"]
        (status,) = pod["status"]["containerStatuses"]
        assert status["ready"] and status["restartCount"] == 0
        # What the kubelet's probe asks, asked over TLS the API server trusts, by Service name.
        ip = pod["status"]["podIP"]
        with httpx.Client(verify=tls, timeout=5) as http:
            answer = http.get(f"https://{ip}:8443/readyz",
                              extensions={"sni_hostname": SERVICE_NAME})
        assert answer.status_code == 200, answer.text
        installed.figures[f"webhook Pod {pod['metadata']['name']}: creation to Ready (s)"] = \
            install.seconds_to_ready(pod)


@pytest.fixture(scope="module")
def probe_pods(kube: Kube, installed: Installed) -> Iterator[None]:
    """Two more controller replicas, one whose loop stalls and one that cannot sync
    (tests.node.hardening), started with the first controller test so that the kubelet's
    minute of probing them runs beside the tests between."""
    hardening.start_probe_pods(kube, NS)
    try:
        yield
    finally:
        for name in (hardening.STALLED, hardening.UNSYNCED):
            kube.delete(path("pods", NS, name))


def test_the_controllers_two_replicas_elect_one_leader(
        node: NodeCluster, kube: Kube, installed: Installed, probe_pods: None) -> None:
    found = pods(kube, "controller")
    names = {p["metadata"]["name"] for p in found}
    assert len(names) == 2 and all(p["spec"]["nodeName"] == node.name for p in found)
    holder = wait_for("a holder of the controller's Lease",
                      lambda: install.lease_holder(kube, NS), READY, 1.0)
    assert holder in names

    def leaders() -> dict[str, float] | None:
        seen = install.leader_metrics(found)
        return seen if sum(seen.values()) == 1 else None
    # Each replica's own view (compactor_controller_leader): the holder leads, the other not.
    assert wait_for("one leader by the replicas' metrics", leaders, 60.0, 1.0) == {
        n: 1.0 if n == holder else 0.0 for n in names}
    for pod in found:
        assert ready(pod)
        installed.figures[f"controller Pod {pod['metadata']['name']}: creation to Ready (s)"] \
            = install.seconds_to_ready(pod)


def test_the_controller_issues_the_tls_secret_the_webhook_loads_from_its_volume(
        node: NodeCluster, kube: Kube, installed: Installed) -> None:
    tls = secret(kube)
    assert set(tls) == {"ca.crt", "ca.key", "tls.crt", "tls.key", "ca-bundle.crt"}
    # How long the webhook Pods had to wait for it (their volume cannot mount before).
    issued = kube.get(path("secrets", NS, "compactor-webhook-tls"))["metadata"]
    created = min(p["metadata"]["creationTimestamp"] for p in pods(kube, "webhook"))
    installed.figures["TLS Secret issued, after the webhook Pods' creation (s)"] = (
        install.timestamp(issued["creationTimestamp"]) - install.timestamp(created)
    ).total_seconds()
    mwc = kube.get(path("mutatingwebhookconfigurations", name="compactor-webhook"))
    (hook,) = mwc["webhooks"]
    assert hook["clientConfig"]["service"] == {"name": "compactor-webhook", "namespace": NS,
                                               "path": "/mutate", "port": 443}
    assert base64.b64decode(hook["clientConfig"]["caBundle"]) == tls["ca-bundle.crt"]
    for pod in pods(kube, "webhook"):
        # The file the kubelet mounted, read in the container's own root, is the Secret's...
        pid = kubelet.container_pid(node.cgroup_root,
                                    pod["status"]["containerStatuses"][0]["containerID"])
        mounted = Path(f"/proc/{pid}/root/etc/compactor/tls/tls.crt").read_bytes()
        assert mounted == tls["tls.crt"]
        # ...and it is what the webhook serves.
        assert served(pod["status"]["podIP"]) == der(tls["tls.crt"])


@pytest.fixture(scope="module")
def policy(node: NodeCluster, kube: Kube, installed: Installed) -> dict[str, Any]:
    """A ClusterCompactionPolicy for namespace ``shop``, its descheduler every minute on the
    kwok pool; and the namespaces and kwok nodes it works on."""
    kube.ensure_namespace(SHOP, default_service_account=True)
    kube.ensure_namespace(QUIET, {"compactor.dev/ignore": "true"}, default_service_account=True)
    node.add_kwok_nodes(KWOK, labels=POOL)
    body = {"apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
            "metadata": {"name": POLICY},
            "spec": {"scope": {"namespaceSelector": {"operator": "In", "values": [SHOP]}},
                     "descheduler": {"interval": "* * * * *",
                                     "nodeSelector": {"matchLabels": POOL}}}}
    return kube.apply(path("clustercompactionpolicies", name=POLICY, api=POLICIES), body)


def test_a_policy_makes_the_controller_run_the_scheduler_on_the_real_node(
        node: NodeCluster, kube: Kube, installed: Installed, policy: dict[str, Any]) -> None:
    started = time.monotonic()
    deployment = wait_for("the compaction scheduler available",
                          lambda: available(kube, "compactor-scheduler", 1), READY, 1.0)
    images = {c["name"]: c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert images.keys() == {"kube-scheduler", "extender"}, images
    assert images["kube-scheduler"].startswith("registry.k8s.io/kube-scheduler:")
    # The extender beside it comes from Compactor's own image, the controller's.
    (controller,) = [c for c in kube.get(path("deployments", NS, "compactor-controller"))[
        "spec"]["template"]["spec"]["containers"]]
    assert images["extender"] == controller["image"]
    (pod,) = pods(kube, "scheduler")
    assert pod["spec"]["nodeName"] == node.name and ready(pod)
    assert [s["restartCount"] for s in pod["status"]["containerStatuses"]] == [0, 0]
    installed.figures["policy applied to scheduler available (s)"] = round(
        time.monotonic() - started, 1)
    installed.figures[f"scheduler Pod {pod['metadata']['name']}: creation to Ready (s)"] = \
        install.seconds_to_ready(pod)


@pytest.fixture(scope="module")
def workload(kube: Kube, policy: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Deployment ``shop/web`` with no replicas yet, once the controller has written its
    intent (compactor-scheduler's: the scheduler is available), and its ReplicaSet."""
    kube.create(path("deployments", SHOP, api=APPS), web(0))

    def intent() -> str | None:
        found = kube.get(path("deployments", SHOP, "web", api=APPS))
        text = (found["metadata"].get("annotations") or {}).get("compactor.dev/intent")
        return text if text and json.loads(text).get("schedulerName") == \
            "compactor-scheduler" else None
    written = wait_for("web's intent naming compactor-scheduler", intent, READY, 1.0)
    rs = wait_for("web's ReplicaSet", lambda: next(iter(kube.items(
        path("replicasets", SHOP, api=APPS), "app=web")), None), READY, 1.0)
    return rs, written


def test_the_api_server_calls_the_webhook_through_its_service(
        kube: Kube, installed: Installed, workload: tuple[dict[str, Any], str]) -> None:
    rs, intent = workload
    before = apiserver_metrics(kube)
    pod = admit(kube, rs)
    assert mutated(pod, intent), pod["metadata"]
    after = apiserver_metrics(kube)
    # The API server's own count of calls to the webhook, answered (HTTP 200) and not failed open.
    calls = {"name": WEBHOOK_NAME, "code": "200"}
    assert scrape.value(after, "apiserver_admission_webhook_request_total", calls) \
        > scrape.value(before, "apiserver_admission_webhook_request_total", calls)
    # A Pod the webhook configuration excludes keeps its scheduler.
    quiet = kube.create(path("pods", QUIET), {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "q-"},
        "spec": rs["spec"]["template"]["spec"]}, dry_run=True)
    assert quiet["spec"]["schedulerName"] == "default-scheduler"


def test_the_scheduler_binds_workload_pods_to_kwok_nodes(
        kube: Kube, installed: Installed, workload: tuple[dict[str, Any], str]) -> None:
    _, intent = workload
    kube.patch(path("deployments", SHOP, "web", api=APPS), {"spec": {"replicas": 3}})

    def bound() -> list[dict[str, Any]] | None:
        found = [p for p in kube.items(path("pods", SHOP), "app=web")
                 if p["spec"].get("nodeName")]
        return found if len(found) == 3 else None
    found = wait_for("three web Pods bound", bound, READY, 1.0)
    assert all(mutated(p, intent) and p["spec"]["nodeName"] in KWOK for p in found)
    events = kube.items(path("events", SHOP, api="apis/events.k8s.io/v1"))
    scheduled = {e["regarding"]["name"]: e["reportingController"] for e in events
                 if e.get("reason") == "Scheduled"}
    assert {p["metadata"]["name"]: scheduled.get(p["metadata"]["name"]) for p in found} == \
        {p["metadata"]["name"]: "compactor-scheduler" for p in found}


def _as_controller(kube: Kube, url: str, body: dict[str, Any]) -> ApiError | None:
    """A merge patch made as the controller's account of this install; its refusal, if any."""
    try:
        kube.request("PATCH", url, body, "application/merge-patch+json", headers={
            "Impersonate-User": f"system:serviceaccount:{NS}:compactor-controller"})
    except ApiError as e:
        return e
    return None


def _refused_by(error: ApiError | None, policy_message: str) -> bool:
    return error is not None and error.status in (403, 422) and policy_message in error.message


def test_the_admission_policies_hold_the_controller_of_this_namespace(
        node: NodeCluster, kube: Kube, installed: Installed,
        workload: tuple[dict[str, Any], str]) -> None:
    """The guards RBAC cannot express hold the controller's account of this install, not
    compactor-system's: a foreign taint on a Node and a change to a Pod's spec are refused,
    beside its own drain taint and a Pod label, which its role allows."""
    node.add_kwok_nodes([VAP_NODE])
    url = path("nodes", name=VAP_NODE)
    taints = kube.get(url)["spec"]["taints"]
    drain = {"key": "compactor.dev/drain", "value": "probe", "effect": "PreferNoSchedule"}
    try:
        foreign = _as_controller(kube, url, {"spec": {"taints": [
            *taints, {"key": "someone-elses", "effect": "NoSchedule"}]}})
        assert _refused_by(foreign, "may change its own drain taint only"), foreign
        assert _as_controller(kube, url, {"spec": {"taints": [*taints, drain]}}) is None
        assert _as_controller(kube, url, {"spec": {"taints": taints}}) is None
        assert kube.get(url)["spec"]["taints"] == taints
    finally:
        kube.delete(url)
    pod = next(iter(kube.items(path("pods", SHOP), "app=web")))
    pod_url = path("pods", SHOP, pod["metadata"]["name"])
    # activeDeadlineSeconds is one of the few mutable spec fields: only the policy stops it.
    spec = _as_controller(kube, pod_url, {"spec": {"activeDeadlineSeconds": 3600}})
    assert _refused_by(spec, "metadata of Pods and ReplicaSets only"), spec
    assert "activeDeadlineSeconds" not in kube.get(pod_url)["spec"]
    assert _as_controller(kube, pod_url, {"metadata": {"labels": {"probe": "yes"}}}) is None


def _job_pod(kube: Kube, job: str) -> dict[str, Any]:
    (pod,) = kube.items(path("pods", NS), f"job-name={job}")
    return pod


def _complete(kube: Kube, job: str) -> dict[str, Any] | None:
    found = kube.find(path("jobs", NS, job, api="apis/batch/v1"))
    conditions = {c["type"]: c["status"] for c in (found or {}).get("status", {})
                  .get("conditions", [])}
    assert conditions.get("Failed") != "True", (found or {}).get("status")
    return found if conditions.get("Complete") == "True" else None


def test_the_descheduler_cronjob_runs_as_real_job_pods(
        node: NodeCluster, kube: Kube, installed: Installed,
        workload: tuple[dict[str, Any], str]) -> None:
    cron = wait_for("the policy's CronJob", lambda: kube.find(
        path("cronjobs", NS, CRONJOB, api="apis/batch/v1")), READY, 1.0)
    assert cron["spec"]["schedule"] == "* * * * *" and not cron["spec"].get("suspend")
    # As an operator would: one run now.
    started = time.monotonic()
    install.kubectl(node.cluster, "create", "job", f"--from=cronjob/{CRONJOB}", "by-hand",
                    "-n", NS)
    wait_for("the Job created by hand complete", lambda: _complete(kube, "by-hand"), READY, 1.0)
    installed.figures["descheduler Job by hand: creation to Complete (s)"] = round(
        time.monotonic() - started, 1)
    pod = _job_pod(kube, "by-hand")
    assert pod["spec"]["nodeName"] == node.name and pod["status"]["phase"] == "Succeeded"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    log = kube.raw(path("pods", NS, pod["metadata"]["name"], sub="log")).text
    print("descheduler Job log, last lines:\n" + "\n".join(log.splitlines()[-15:]))
    # What it ran with never evicts from this install's namespace, nor from kube-system.
    config = yaml.safe_load(kube.get(path("configmaps", NS, CRONJOB))["data"]["policy.yaml"])
    (taints,) = [c["args"] for c in config["profiles"][0]["pluginConfig"]
                 if c["name"] == "RemovePodsViolatingNodeTaints"]
    assert taints["namespaces"] == {"exclude": sorted(["kube-system", NS])}

    # And one on its own schedule (every minute), started by the CronJob controller.
    def scheduled() -> dict[str, Any] | None:
        for job in kube.items(path("jobs", NS, api="apis/batch/v1")):
            owners = job["metadata"].get("ownerReferences") or []
            manual = (job["metadata"].get("annotations") or {}).get(
                "cronjob.kubernetes.io/instantiate") == "manual"
            if not manual and any(o["kind"] == "CronJob" and o["name"] == CRONJOB
                                  for o in owners):
                return _complete(kube, job["metadata"]["name"])
        return None
    job = wait_for("a Job of the CronJob's schedule complete", scheduled, READY, 1.0)
    pod = _job_pod(kube, job["metadata"]["name"])
    assert pod["spec"]["nodeName"] == node.name and pod["status"]["phase"] == "Succeeded"
    assert kube.get(path("cronjobs", NS, CRONJOB, api="apis/batch/v1"))["status"].get(
        "lastSuccessfulTime")


def test_the_kubelet_restarts_a_stalled_controller_and_holds_an_unsynced_one_unready(
        kube: Kube, installed: Installed, probe_pods: None) -> None:
    """The controller's probes as the kubelet acts on them: the replica whose loop stalls is
    restarted (its previous log says why), the one whose caches cannot sync stays unready and
    is not restarted, and the Deployment's replicas are ready and alive."""
    def restarted() -> dict[str, Any] | None:
        pod = kube.get(path("pods", NS, hardening.STALLED))
        statuses = pod["status"].get("containerStatuses") or [{}]
        return pod if statuses[0].get("restartCount", 0) >= 1 else None
    stalled = wait_for("the stalled replica restarted", restarted, READY, 1.0)
    events = hardening.kubelet_events(kube, NS, hardening.STALLED)
    assert any(r == "Unhealthy" and m.startswith("Liveness probe failed")
               and "503" in m for r, m in events), events
    assert any(r == "Killing" and "failed liveness probe, will be restarted" in m
               for r, m in events), events
    previous = hardening.previous_log(kube, NS, hardening.STALLED)
    assert "the pass loop stops here" in previous, previous[-2000:]
    assert "liveness probe failed: the pass loop has not come round for " in previous

    unsynced = kube.get(path("pods", NS, hardening.UNSYNCED))
    (status,) = unsynced["status"]["containerStatuses"]
    assert not status["ready"] and status["restartCount"] == 0, status
    code, reason = hardening.probe_answer(unsynced, "/readyz")
    assert code == 503 and "caches not synced: " in reason, (code, reason)
    assert hardening.probe_answer(unsynced, "/livez")[0] == 200
    assert any(r == "Unhealthy" and m.startswith("Readiness probe failed") and "503" in m
               for r, m in hardening.kubelet_events(kube, NS, hardening.UNSYNCED))
    for pod in pods(kube, "controller"):
        assert hardening.probe_answer(pod, "/readyz") == (200, "caches synced")
        assert hardening.probe_answer(pod, "/livez")[0] == 200
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
    installed.figures["stalled controller replica: created to first restart (s)"] = round((
        install.timestamp(stalled["status"]["containerStatuses"][0]["lastState"]["terminated"]
                          ["finishedAt"])
        - install.timestamp(stalled["metadata"]["creationTimestamp"])).total_seconds())
    for name in (hardening.STALLED, hardening.UNSYNCED):
        kube.delete(path("pods", NS, name))


def test_every_compactor_pod_is_admitted_under_the_restricted_profile_with_its_own_token(
        node: NodeCluster, kube: Kube, installed: Installed,
        workload: tuple[dict[str, Any], str]) -> None:
    """The namespace enforces the restricted Pod Security profile (a Pod breaking it is
    refused), and every part ran there: webhook, controller, the scheduler's Deployment and the
    descheduler's Job Pods the controller made, none refused. Each has the projected token of
    an hour, for the API server's audience, bound to it, and not the kubelet's."""
    labels = kube.get(path("namespaces", name=NS))["metadata"]["labels"]
    assert labels[hardening.RESTRICTED] == "restricted", labels
    refusal = hardening.refused_by_the_profile(kube, NS)
    assert 'violates PodSecurity "restricted:latest"' in refusal, refusal
    found = wait_for("a descheduler Job Pod beside the others", lambda: (
        lambda ps: ps if any(p["metadata"]["labels"].get("app.kubernetes.io/component")
                             == "descheduler" for p in ps) else None)([
            p for p in kube.items(path("pods", NS)) if not p["metadata"].get(
                "deletionTimestamp") and p["metadata"]["labels"].get(
                "app.kubernetes.io/component") != "probe-test"]), READY, 1.0)
    assert {p["metadata"]["labels"]["app.kubernetes.io/component"] for p in found} == {
        "webhook", "controller", "scheduler", "descheduler"}
    assert hardening.failed_creations(kube, NS) == []
    lives = hardening.check_tokens(node, kube, NS, found)
    installed.figures["token lifetime per running Pod (s)"] = lives


def test_each_network_policy_selects_its_components_pods_and_the_ports_they_serve(
        node: NodeCluster, kube: Kube, installed: Installed,
        workload: tuple[dict[str, Any], str]) -> None:
    """The API server admitted the four policies; each selects its component's Pods and no
    other of the namespace; what it lets in is what those Pods listen on (each running Pod's
    socket table; for the descheduler, whose runs have ended, the port its log says it
    served on); what it lets out covers every connection the running Pods have open, all of
    them to the API server (the harness serves it at the kubernetes Service's address, with no
    kube-proxy in between). The node's network plugin enforces none of them: kube-router does,
    in the next test."""
    policies = {p["metadata"]["name"]: p for p in kube.items(
        path("networkpolicies", NS, api="apis/networking.k8s.io/v1"))}
    components = ("webhook", "controller", "scheduler", "descheduler")
    assert set(policies) == {f"compactor-{c}" for c in components}
    running = [p for p in kube.items(path("pods", NS)) if not p["metadata"].get(
        "deletionTimestamp") and p["status"].get("phase") in ("Running", "Succeeded")]
    seen: dict[str, Any] = {}
    checked: set[str] = set()
    for pod in running:
        name = pod["metadata"]["name"]
        component = str((pod["metadata"].get("labels") or {}).get(
            "app.kubernetes.io/component"))
        chosen = [n for n, p in policies.items() if network_policies.selects(p, pod)]
        # Another Pod of the namespace (a test's) is selected by none.
        assert chosen == ([f"compactor-{component}"] if component in components else []), (
            name, chosen)
        if not chosen:
            continue
        policy = policies[chosen[0]]
        opened = network_policies.ingress_ports(policy, pod)
        if component != "descheduler":
            served = network_policies.listening_ports(node.cgroup_root, pod)
            peers = network_policies.outgoing(node.cgroup_root, pod)
            assert peers and {address for address, _ in peers} == {SERVICE_IP}, (name, peers)
            assert {("TCP", port) for _, port in peers} <= network_policies.egress_ports(
                policy, pod), (name, peers)
        elif pod["status"]["phase"] == "Succeeded":
            log = kube.raw(path("pods", NS, name, sub="log")).text
            served = {("TCP", int(m)) for m in re.findall(
                r"Serving securely on \S*:(\d+)", log)}
        else:
            continue  # a run of the schedule under way: its log may not say so yet
        assert opened == served, (name, opened, served)
        seen[name] = sorted(port for _, port in opened)
        checked.add(component)
    assert checked == set(components)
    installed.figures["NetworkPolicy ingress ports per Pod, as served"] = seen


def test_kube_router_enforces_the_network_policies(
        node: NodeCluster, kube: Kube, installed: Installed,
        workload: tuple[dict[str, Any], str]) -> None:
    """With kube-router's firewall enforcing the policies (docs/install.md), from a probe Pod
    that no policy selects: each running component's opened ports connect, and a port it
    listens on beyond them is refused, though the node still reaches it. From each component
    Pod the API server connects, and nothing else does (the probe's listener, the kubelet).
    Every refused path connected before kube-router started and connects again once it has
    gone; admissions still go through the webhook. The descheduler's Pods have ended by now
    (its policy's selection is checked above)."""
    rs, intent = workload
    policies = {p["metadata"]["name"]: p for p in kube.items(
        path("networkpolicies", NS, api="apis/networking.k8s.io/v1"))}
    kube.create(path("pods", QUIET), network_policies.probe_pod("netpol-probe"))
    try:
        probe_pod = wait_for("the probe Pod running", lambda: next(
            (p for p in [kube.get(path("pods", QUIET, "netpol-probe"))]
             if p["status"].get("phase") == "Running" and p["status"].get("podIP")), None),
            READY, 0.5)
        probe = network_policies.peer(node.cgroup_root, "probe", probe_pod)
        targets = [network_policies.peer(node.cgroup_root, c, pod, policies[f"compactor-{c}"])
                   for c in ("webhook", "controller", "scheduler")
                   for pod in pods(kube, c)[:1]]
        assert all(t.opened for t in targets) and len(targets) == 3, targets
        with contextlib.ExitStack() as listening:
            for p in (probe, *targets):
                listening.enter_context(network_policies.listen_in(p.pid, network_policies.BEYOND))
            before = network_policies.beyond_policy(probe, targets)
            started = time.monotonic()
            with kube_router.enforcing(node.name, node.cluster.kubeconfig,
                                       node.dir / "logs" / "kube-router.log",
                                       [probe.ip, *(t.ip for t in targets)]):
                guarded = round(time.monotonic() - started, 1)
                refused = network_policies.beyond_policy(probe, targets)
                allowed = network_policies.within_policy(probe, targets)
                admitted = admit(kube, rs)
            assert kube_router.leftovers() == []
            after = network_policies.beyond_policy(probe, targets)
    finally:
        kube.delete(path("pods", QUIET, "netpol-probe"))
    assert set(before.values()) == {"open"}, before
    assert set(refused.values()) == {"refused"}, refused  # kube-router REJECTs: ICMP unreachable
    assert set(allowed.values()) == {"open"}, allowed
    assert mutated(admitted, intent), admitted["metadata"]
    assert set(after.values()) == {"open"}, after
    installed.figures["kube-router: start to every Pod guarded (s)"] = guarded
    installed.figures["kube-router: paths refused, paths allowed"] = [len(refused), len(allowed)]


def _failed(metrics: str) -> tuple[float, float]:
    """Calls to the webhook the API server failed open, and calls not answered HTTP 200."""
    calls = "apiserver_admission_webhook_request_total"
    hook = {"name": WEBHOOK_NAME}
    return (scrape.value(metrics, "apiserver_admission_webhook_fail_open_count", hook),
            scrape.value(metrics, calls, hook)
            - scrape.value(metrics, calls, {**hook, "code": "200"}))


class Admissions(threading.Thread):
    """Dry-run creations of web Pods, one after another, until stopped: each must come back
    mutated (the webhook answered, with a certificate the API server trusts)."""

    def __init__(self, node: NodeCluster, rs: dict[str, Any], intent: str) -> None:
        super().__init__(daemon=True)
        self.kube, self.rs, self.intent = node.client(), rs, intent
        self.stop = threading.Event()
        self.count = 0
        self.failures: list[str] = []

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                try:
                    pod = admit(self.kube, self.rs)
                    if not mutated(pod, self.intent):
                        meta = pod["metadata"]
                        same = (meta.get("annotations") or {}).get(
                            "compactor.dev/intent") == self.intent
                        self.failures.append(
                            f"{time.strftime('%T')} not mutated: schedulerName "
                            f"{pod['spec'].get('schedulerName')}, labels {meta.get('labels')}, "
                            f"same intent: {same}")
                except (ApiError, httpx.HTTPError) as e:
                    self.failures.append(f"{time.strftime('%T')} {e}")
                self.count += 1
                self.stop.wait(0.25)
        finally:
            self.kube.close()


def test_the_serving_certificate_rotates_without_a_restart_or_a_failed_admission(
        node: NodeCluster, kube: Kube, installed: Installed,
        workload: tuple[dict[str, Any], str]) -> None:
    rs, intent = workload
    old = secret(kube)["tls.crt"]
    webhooks = {p["metadata"]["name"]: p["status"]["podIP"] for p in pods(kube, "webhook")}
    fail_open, not_ok = _failed(apiserver_metrics(kube))
    answers = webhook_answers(kube)
    loop = Admissions(node, rs, intent)
    loop.start()
    try:
        # As an operator would: a shorter serving lifetime, which the controller acts on at once.
        install.kubectl(node.cluster, "set", "env", "deployment/compactor-controller",
                        "-n", NS, "COMPACTOR_CERT_SERVING_LIFETIME=30m")
        new = wait_for("a new serving certificate in the Secret", lambda: (
            lambda crt: crt if crt != old else None)(secret(kube)["tls.crt"]), READY, 0.25)
        changed = time.monotonic()
        info = x509.load_pem_x509_certificate(new)
        life = info.not_valid_after_utc - info.not_valid_before_utc
        assert life.total_seconds() == pytest.approx(35 * 60, abs=2)  # 30m, backdated 5m
        late: dict[str, float] = {}
        deadline = time.monotonic() + READY
        while len(late) < len(webhooks):
            assert time.monotonic() < deadline, f"still serving the old certificate: {late}"
            for name, ip in webhooks.items():
                if name not in late and served(ip) == der(new):
                    late[name] = round(time.monotonic() - changed, 1)
            time.sleep(0.25)
        time.sleep(5)  # admissions go on after the switch, too
    finally:
        loop.stop.set()
        loop.join(30)
    answered = {k: v - answers.get(k, 0.0) for k, v in webhook_answers(kube).items()
                if v != answers.get(k, 0.0)}
    installed.figures["webhook answers during the rotation"] = answered
    assert loop.failures == [] and loop.count > 20, (loop.count, answered, loop.failures[:5])
    after = {p["metadata"]["name"]: p for p in pods(kube, "webhook")}
    assert set(after) == set(webhooks)
    assert all(p["status"]["containerStatuses"][0]["restartCount"] == 0 for p in after.values())
    # The API server's side: no call failed open, every call was answered HTTP 200.
    assert _failed(apiserver_metrics(kube)) == (fail_open, not_ok)
    for name, seconds in late.items():
        installed.figures[f"webhook Pod {name}: serving the new certificate after the Secret "
                          "changed (s)"] = seconds
    installed.figures["dry-run admissions during the rotation, all mutated"] = loop.count
    # The controller's rollout ends with a leader among the new replicas.
    wait_for("the controller rolled out", lambda: available(kube, "compactor-controller", 2),
             READY, 1.0)
    names = {p["metadata"]["name"] for p in pods(kube, "controller")}
    wait_for("a leader among the new replicas", lambda: (
        lambda h: h if h in names else None)(install.lease_holder(kube, NS)), READY, 1.0)


# --- figures ------------------------------------------------------------------------------


def _own_histogram(kube: Kube) -> scrape.Buckets:
    """compactor_admission_duration_seconds summed over the webhook's Pods."""
    summed: dict[float, float] = {}
    for text in webhook_metrics(kube):
        for le, count in scrape.histogram(text, "compactor_admission_duration_seconds"):
            summed[le] = summed.get(le, 0.0) + count
    return sorted(summed.items())


def _timed(kube: Kube, rs: dict[str, Any], namespace: str, count: int) -> list[float]:
    took = []
    for _ in range(count):
        t = time.perf_counter()
        admit(kube, rs, namespace)
        took.append((time.perf_counter() - t) * 1000)
    return took


def test_admission_latency_through_the_service(
        kube: Kube, installed: Installed, workload: tuple[dict[str, Any], str]) -> None:
    """The webhook as the API server sees it (its histogram of calls to the webhook), and a
    dry-run creation timed with and without it."""
    rs, _ = workload
    _timed(kube, rs, SHOP, 20)  # warm: connections, caches
    match = {"name": WEBHOOK_NAME, "type": "admit", "operation": "CREATE"}
    before = scrape.histogram(apiserver_metrics(kube),
                              "apiserver_admission_webhook_admission_duration_seconds", match)
    own_before = _own_histogram(kube)
    with_hook = _timed(kube, rs, SHOP, 200)
    buckets = scrape.delta(scrape.histogram(
        apiserver_metrics(kube), "apiserver_admission_webhook_admission_duration_seconds",
        match), before)
    own = scrape.delta(_own_histogram(kube), own_before)
    without = _timed(kube, rs, QUIET, 200)  # the same Pod where no webhook is called
    assert buckets[-1][1] == 200
    f = installed.figures
    f["webhook call, API server histogram p50/p99 (ms)"] = [
        round(scrape.quantile(buckets, q) * 1000, 1) for q in (0.5, 0.99)]
    f["webhook call, API server histogram buckets (le s: count)"] = {
        str(le): int(c) for le, c in buckets}
    f["webhook's own answer time p50/p99 (ms, its histogram)"] = [
        round(scrape.quantile(own, q) * 1000, 2) for q in (0.5, 0.99)]
    f["dry-run Pod creation with the webhook p50/p99 (ms)"] = [
        round(percentile(with_hook, q), 1) for q in (0.5, 0.99)]
    f["dry-run Pod creation without it p50/p99 (ms)"] = [
        round(percentile(without, q), 1) for q in (0.5, 0.99)]
    f["webhook's share of a creation, p50 (ms)"] = round(
        statistics.median(with_hook) - statistics.median(without), 1)


def _chain_ids(archive: Path) -> list[str]:
    """The snapshot keys containerd unpacks a docker-archive's layers to (their chain IDs)."""
    with tarfile.open(archive) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
        config = json.load(tar.extractfile(manifest[0]["Config"]))  # type: ignore[arg-type]
    chain: list[str] = []
    for diff in config["rootfs"]["diff_ids"]:
        chain.append(diff if not chain else "sha256:" + hashlib.sha256(
            f"{chain[-1]} {diff}".encode()).hexdigest())
    return chain


_UNITS = {"": 1, "B": 1, "kB": 1e3, "KB": 1e3, "KiB": 2**10, "MB": 1e6, "MiB": 2**20,
          "GB": 1e9, "GiB": 2**30}


def _bytes(text: str) -> float:
    found = re.fullmatch(r"([0-9.]+)\s*([A-Za-z]*)", text.strip())
    assert found and found.group(2) in _UNITS, text
    return float(found.group(1)) * _UNITS[found.group(2)]


def test_image_size_and_memory(node: NodeCluster, kube: Kube, installed: Installed) -> None:
    (archive,) = [a for a, tag in images().items() if tag == installed.tag]
    paths = node.containerd_paths
    usage = subprocess.run(
        [str(paths.bin_dir / "ctr"), f"--address={paths.socket}",
         f"--namespace={containerd.NAMESPACE}", "snapshots", "usage"],
        check=True, capture_output=True, text=True, timeout=120).stdout
    sizes = {}
    for line in usage.splitlines()[1:]:  # KEY SIZE INODES, SIZE as "12.3 MiB"
        parts = line.split()
        sizes[parts[0]] = _bytes(" ".join(parts[1:-1]))
    chain = _chain_ids(archive)
    assert all(c in sizes for c in chain), (chain, usage)
    f = installed.figures
    f["compactor image archive (MB)"] = round(archive.stat().st_size / 1e6, 1)
    f["compactor image unpacked, its layers' snapshots (MB)"] = round(
        sum(sizes[c] for c in chain) / 1e6, 1)
    f["compactor image layers"] = len(chain)

    summary = kube.get(f"/api/v1/nodes/{node.name}/proxy/stats/summary")
    seen = {}
    for pod in summary["pods"]:
        if pod["podRef"]["namespace"] != NS:
            continue
        for c in pod["containers"]:
            memory = c.get("memory") or {}
            seen[f"{pod['podRef']['name']}/{c['name']}"] = {
                "rss MiB": round(memory.get("rssBytes", 0) / 2**20, 1),
                "working set MiB": round(memory.get("workingSetBytes", 0) / 2**20, 1)}
    components = {k.split("-")[1] for k in seen}
    assert {"webhook", "controller", "scheduler"} <= components, seen
    assert all(v["rss MiB"] > 0 for v in seen.values()), seen
    f["memory per container (kubelet summary API)"] = seen
