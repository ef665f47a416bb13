"""Shared pieces of integration tests: manifests, waits, the real webhook run as a process."""

from __future__ import annotations

import base64
import os
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml

from localcluster import ApiError, Cluster, Kube
from localcluster.kube import path, wait_for
from localcluster.process import Process, free_port

ROOT = Path(__file__).resolve().parents[2]
PAUSE = "registry.k8s.io/pause:3.10"
WEBHOOK_NAMESPACE_LABEL = "compactor-test-webhook"


def pod_template(labels: dict[str, str], cpu: str = "100m") -> dict[str, Any]:
    return {"metadata": {"labels": labels}, "spec": {"containers": [{
        "name": "app", "image": PAUSE,
        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}}


def deployment(name: str, replicas: int, cpu: str = "100m",
               annotations: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": pod_template(labels, cpu)},
    }


def running_pods(kube: Kube, ns: str, selector: str, count: int) -> list[dict[str, Any]] | None:
    pods = kube.items(path("pods", ns), selector)
    running = [p for p in pods if p["status"].get("phase") == "Running"]
    return running if len(running) == count else None


def pods_of(kube: Kube, ns: str, selector: str, count: int) -> list[dict[str, Any]]:
    return wait_for(f"{count} pods with {selector}", lambda: (
        lambda pods: pods if len(pods) >= count else None)(kube.items(path("pods", ns), selector)))


def gone(kube: Kube, url: str) -> bool:
    try:
        kube.get(url)
    except ApiError as e:
        return e.status == 404
    return False


def apply_file(kube: Kube, file: Path) -> list[dict[str, Any]]:
    """Server-side apply of every object in a YAML file (the kinds our manifests use)."""
    out = []
    for obj in yaml.safe_load_all(file.read_text()):
        if not obj:
            continue
        plural = obj["kind"].lower() + "s"
        ns = obj["metadata"].get("namespace")
        out.append(kube.apply(path(plural, ns, obj["metadata"]["name"]), obj))
    return out


def service_account_token(kube: Kube, namespace: str, name: str) -> str:
    resp = kube.create(path("serviceaccounts", namespace, name, sub="token"), {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600}})
    return str(resp["status"]["token"])


def token_kubeconfig(cluster: Cluster, token: str, file: Path) -> Path:
    file.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "local", "cluster": {
            "server": cluster.server, "certificate-authority": str(cluster.pki / "ca.crt")}}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "local", "user": "sa"}}],
    }))
    return file


def webhook_metric(hook: RunningWebhook, name: str, **labels: str) -> float:
    text = httpx.get(f"{hook.url}/metrics", verify=False).text
    want = "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else ""
    for line in text.splitlines():
        if line.startswith(f"{name}{want} "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _wait_until_called(kube: Kube, hook: RunningWebhook, selector_value: str) -> None:
    """The API server learns of new webhook configurations asynchronously; probe with bare
    Pods (which the webhook skips) until it reports being called."""
    ns = f"probe-{uuid.uuid4().hex[:6]}"
    kube.ensure_namespace(ns, {WEBHOOK_NAMESPACE_LABEL: selector_value},
                          default_service_account=True)

    def called() -> bool:
        kube.create(path("pods", ns), {"metadata": {"generateName": "probe-"},
                                       "spec": {"containers": [{"name": "c", "image": "p"}]}})
        return webhook_metric(hook, "compactor_admission_requests_total",
                              outcome="skipped") > 0
    try:
        wait_for("the API server to call the webhook", called, interval=0.3)
    finally:
        kube.delete(path("namespaces", name=ns))


class RunningWebhook:
    def __init__(self, process: Process, port: int, config_name: str) -> None:
        self.process, self.port, self.config_name = process, port, config_name

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"


def start_webhook_process(cluster: Cluster, kube: Kube, workdir: Path, cert: Path, key: Path,
                          extra_env: dict[str, str] | None = None) -> tuple[Process, int]:
    """``python -m webhook`` as its own process, with the compactor-webhook ServiceAccount's
    token (so RBAC is real); returns once it answers /readyz."""
    kube.ensure_namespace("compactor-system")
    apply_file(kube, ROOT / "deploy" / "rbac" / "webhook.yaml")
    token = service_account_token(kube, "compactor-system", "compactor-webhook")
    kubeconfig = token_kubeconfig(cluster, token, workdir / "webhook.kubeconfig")
    port = free_port()
    env = {**os.environ, "COMPACTOR_WEBHOOK_HOST": "127.0.0.1",
           "COMPACTOR_WEBHOOK_PORT": str(port), "COMPACTOR_WEBHOOK_CERT_FILE": str(cert),
           "COMPACTOR_WEBHOOK_KEY_FILE": str(key), "COMPACTOR_WEBHOOK_KUBECONFIG": str(kubeconfig),
           **(extra_env or {})}
    proc = Process(f"webhook-{uuid.uuid4().hex[:6]}", [sys.executable, "-m", "webhook"],
                   workdir / f"webhook-{port}.log", env=env)
    proc.start()
    cluster.processes.append(proc)
    try:
        # Any certificate will do for the health check; the API server judges the real one.
        proc.wait_healthy(lambda: httpx.get(f"https://127.0.0.1:{port}/readyz", verify=False,
                                            timeout=1).status_code == 200, 30)
    except BaseException:
        proc.stop()
        cluster.processes.remove(proc)
        raise
    return proc, port


def webhook_configuration(name: str, port: int, selector_value: str,
                          ca_bundle: bytes | None, failure_policy: str = "Ignore"
                          ) -> dict[str, Any]:
    client: dict[str, Any] = {"url": f"https://127.0.0.1:{port}/mutate"}
    if ca_bundle is not None:
        client["caBundle"] = base64.b64encode(ca_bundle).decode()
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": f"{name}.pods.compactor.dev",
            "clientConfig": client,
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["pods"], "scope": "Namespaced"}],
            "namespaceSelector": {"matchLabels": {WEBHOOK_NAMESPACE_LABEL: selector_value}},
            "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": failure_policy, "timeoutSeconds": 5,
            "reinvocationPolicy": "IfNeeded",
        }],
    }


@contextmanager
def run_webhook(cluster: Cluster, kube: Kube, workdir: Path, selector_value: str = "on",
                extra_env: dict[str, str] | None = None) -> Iterator[RunningWebhook]:
    """The webhook process with a certificate from the test CA, registered for namespaces
    labelled ``compactor-test-webhook=<selector_value>``."""
    cert, key = cluster.ca.serving(["localhost"], ["127.0.0.1"]).write(workdir, "webhook")
    proc, port = start_webhook_process(cluster, kube, workdir, cert, key, extra_env)
    name = f"compactor-test-{uuid.uuid4().hex[:6]}"
    try:
        kube.create(path("mutatingwebhookconfigurations"),
                    webhook_configuration(name, port, selector_value, cluster.ca.cert_pem))
        hook = RunningWebhook(proc, port, name)
        _wait_until_called(kube, hook, selector_value)
        yield hook
    finally:
        kube.delete(path("mutatingwebhookconfigurations", name=name))
        proc.stop()
        cluster.processes.remove(proc)
