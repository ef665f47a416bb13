"""Shared pieces of integration tests: small manifests and waits. The webhook process and
RBAC helpers live in localcluster.stack, which the demo uses too."""

from __future__ import annotations

from typing import Any

from localcluster import ApiError, Kube
from localcluster.cluster import ROOT
from localcluster.kube import path, wait_for
from localcluster.stack import (
    WEBHOOK_NAMESPACE_LABEL,
    RunningWebhook,
    apply_file,
    run_webhook,
    service_account_token,
    start_webhook_process,
    token_kubeconfig,
    webhook_configuration,
    webhook_metric,
)

PAUSE = "registry.k8s.io/pause:3.10"
__all__ = ["ROOT", "WEBHOOK_NAMESPACE_LABEL", "RunningWebhook", "apply_file", "run_webhook",
           "service_account_token", "start_webhook_process", "token_kubeconfig",
           "webhook_configuration", "webhook_metric"]


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


