"""The local control plane acts as a real cluster: it schedules, calls webhooks, enforces PDBs."""

from __future__ import annotations

import base64
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from localcluster import ApiError, Cluster, Kube
from localcluster.cluster.kube import path, wait_for
from localcluster.cluster.process import free_port
from tests.integration.helpers import deployment, gone, running_pods


def test_deployment_pods_are_scheduled_onto_kwok_nodes_and_run(
    kube: Kube, workloads: Cluster, nodes: list[str], namespace: str
) -> None:
    kube.create(path("deployments", namespace), deployment("web", 3))

    pods = wait_for("3 Running pods", lambda: running_pods(kube, namespace, "app=web", 3))

    for pod in pods:
        assert pod["spec"]["nodeName"] in nodes
        assert pod["spec"]["schedulerName"] == "default-scheduler"
        owner = pod["metadata"]["ownerReferences"][0]
        assert owner["kind"] == "ReplicaSet" and owner["controller"] is True
    events = kube.items(path("events", namespace))
    scheduled = [e for e in events if e.get("reason") == "Scheduled"]
    assert len(scheduled) >= 3, "the real scheduler records a Scheduled event per binding"


class _LabelingWebhook(BaseHTTPRequestHandler):
    """Adds ``mutated-by=test-webhook`` to every Pod it is asked about and counts the calls."""

    calls: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).calls.append(review)
        labels = review["request"]["object"]["metadata"].get("labels") or {}
        patch = [{"op": "add", "path": "/metadata/labels",
                  "value": {**labels, "mutated-by": "test-webhook"}}]
        body = json.dumps({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {
                "uid": review["request"]["uid"], "allowed": True, "patchType": "JSONPatch",
                "patch": base64.b64encode(json.dumps(patch).encode()).decode(),
            },
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def loopback_webhook(cluster: Cluster, tmp_path: Any) -> Iterator[int]:
    pair = cluster.ca.serving(["localhost"], ["127.0.0.1"])
    cert, key = pair.write(tmp_path, "webhook")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", port), _LabelingWebhook)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    _LabelingWebhook.calls = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield port
    server.shutdown()
    server.server_close()


def test_api_server_calls_a_registered_mutating_webhook_and_applies_its_patch(
    kube: Kube, cluster: Cluster, loopback_webhook: int, namespace: str
) -> None:
    name = f"test-labeler-{namespace}"
    kube.create(path("mutatingwebhookconfigurations"), {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "labeler.test.compactor.dev",
            "clientConfig": {
                "url": f"https://127.0.0.1:{loopback_webhook}/mutate",
                "caBundle": base64.b64encode(cluster.ca.cert_pem).decode(),
            },
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["pods"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Fail", "timeoutSeconds": 5,
        }],
    })
    try:
        pod = {"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}
        # The configuration reaches the API server's webhook cache asynchronously.
        created = wait_for("the webhook to be called", lambda: _create_until_mutated(
            kube, namespace, pod))
    finally:
        kube.delete(path("mutatingwebhookconfigurations", name=name))

    assert created["metadata"]["labels"]["mutated-by"] == "test-webhook"
    calls = _LabelingWebhook.calls
    assert calls and calls[-1]["request"]["operation"] == "CREATE"
    assert calls[-1]["request"]["kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    stored = kube.get(path("pods", namespace, "p"))
    assert stored["metadata"]["labels"]["mutated-by"] == "test-webhook"


def _create_until_mutated(kube: Kube, ns: str, pod: dict[str, Any]) -> dict[str, Any] | None:
    created = kube.create(path("pods", ns), pod)
    if created["metadata"].get("labels", {}).get("mutated-by"):
        return created
    kube.delete(path("pods", ns, pod["metadata"]["name"]))
    wait_for("pod gone", lambda: gone(kube, path("pods", ns, pod["metadata"]["name"])))
    return None


def test_eviction_of_a_pod_protected_by_a_pdb_is_refused_with_429(
    kube: Kube, workloads: Cluster, namespace: str
) -> None:
    kube.create(path("deployments", namespace), deployment("guarded", 2))
    pods = wait_for("2 Running pods", lambda: running_pods(kube, namespace, "app=guarded", 2))
    kube.create(path("poddisruptionbudgets", namespace), {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "guard"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "guarded"}}},
    })
    # The disruption controller must have judged the budget before the API server enforces it.
    wait_for("PDB status", lambda: kube.get(path("poddisruptionbudgets", namespace, "guard"))
             ["status"].get("currentHealthy") == 2)

    victim = pods[0]["metadata"]["name"]
    with pytest.raises(ApiError) as refused:
        kube.evict(namespace, victim)
    assert refused.value.status == 429
    assert "disruption budget" in refused.value.message
    assert kube.get(path("pods", namespace, victim))["metadata"].get("deletionTimestamp") is None

    # The same eviction goes through once the budget allows one disruption.
    kube.patch(path("poddisruptionbudgets", namespace, "guard"), {"spec": {"maxUnavailable": 1}})
    wait_for("budget allows 1", lambda: kube.get(path("poddisruptionbudgets", namespace, "guard"))
             ["status"].get("disruptionsAllowed") == 1)
    kube.evict(namespace, victim)
    wait_for("evicted pod gone", lambda: gone(kube, path("pods", namespace, victim)))
