"""A ``Start`` rebuilt on a fresh cluster: Karpenter launches the start's instance types, then
the workloads are created while no scheduler runs and each Pod is bound to its recorded node,
so every contender of a seed begins from the same placement."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import httpx

from localcluster.bench.race.contract import (
    PLACEHOLDER_PRIORITY,
    Protection,
    never_move_annotations,
)
from localcluster.bench.race.start import Start, Workload
from localcluster.cluster.control_plane import Cluster
from localcluster.cluster.karpenter import NODEPOOL_LABEL, SPIKE_NAMESPACE, pool_nodes
from localcluster.cluster.kube import Kube, path, wait_for

PAUSE = "registry.k8s.io/pause:3.10"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


def launch_nodes(kube: Kube, pool: str, start: Start, timeout: float = 600.0) -> list[str]:
    """The start's nodes from the NodePool, as a spike makes them: per instance type, Pods that
    each take more than half of one, Pending until Karpenter launches a node for each. Returns
    node i's name at index i."""
    kube.ensure_namespace(SPIKE_NAMESPACE, default_service_account=True)
    wanted: dict[str, int] = defaultdict(int)
    for t in start.nodes:
        wanted[t.name] += 1
    by_name = {t.name: t for t in start.nodes}
    for i, (name, count) in enumerate(sorted(wanted.items())):
        labels = {"app": f"spike-{i}"}
        kube.apply(path("deployments", SPIKE_NAMESPACE, f"spike-{i}"), {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"spike-{i}"},
            "spec": {"replicas": count, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"terminationGracePeriodSeconds": 0,
                         "nodeSelector": {NODEPOOL_LABEL: pool, INSTANCE_TYPE_LABEL: name},
                         "containers": [{"name": "spike", "image": PAUSE, "resources": {
                             "requests": {"cpu": f"{by_name[name].cpu * 6 // 10}m"}}}]}}}})

    def launched() -> dict[str, list[str]] | None:
        try:
            running = [p for p in kube.items(path("pods", SPIKE_NAMESPACE))
                       if p["status"].get("phase") == "Running"]
            nodes = pool_nodes(kube, pool)
        except httpx.HTTPError:
            return None
        if len(running) < len(start.nodes) or len(nodes) < len(start.nodes):
            return None
        out: dict[str, list[str]] = defaultdict(list)
        for n in nodes:
            out[n["metadata"]["labels"].get(INSTANCE_TYPE_LABEL, "")].append(
                n["metadata"]["name"])
        return out
    by_type = wait_for(f"{len(start.nodes)} nodes from {pool}", launched, timeout=timeout,
                       interval=1.0)
    for i in range(len(wanted)):
        kube.delete(path("deployments", SPIKE_NAMESPACE, f"spike-{i}"))
    wait_for("the spike's Pods gone", lambda: not kube.items(path("pods", SPIKE_NAMESPACE)),
             timeout=120, interval=0.5)
    queues = {k: sorted(v) for k, v in by_type.items()}
    return [queues[t.name].pop(0) for t in start.nodes]


def create_bound(cluster: Cluster, kube: Kube, start: Start, nodes: list[str]) -> None:
    """The workloads with the default scheduler stopped, every Pod bound where the start puts
    it; then the scheduler again (it places the DaemonSet's Pods), until every Pod runs."""
    scheduler = cluster.process("kube-scheduler")
    scheduler.stop()
    try:
        _objects(kube, start)
        for w in start.workloads:
            if w.kind != "DaemonSet":
                _bind(kube, w, [nodes[i] for i in start.placement[w.key]])
    finally:
        scheduler.start()
    wait_for("every Pod of the start Running", lambda: _running(kube, start, len(nodes)),
             timeout=240, interval=1.0)


def _objects(kube: Kube, start: Start) -> None:
    for ns in sorted({w.namespace for w in start.workloads}):
        kube.ensure_namespace(ns, default_service_account=True)
    kube.apply(path("priorityclasses", name="overprovisioning"), {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "overprovisioning"}, "value": PLACEHOLDER_PRIORITY,
        "globalDefault": False, "description": "Placeholders that hold spare capacity."})
    for w in start.workloads:
        kube.create(path(w.kind.lower() + "s", w.namespace),
                    workload_object(w, start))
        if w.max_unavailable is not None:
            mu: int | str = int(w.max_unavailable) if w.max_unavailable.isdigit() \
                else w.max_unavailable
            kube.create(path("poddisruptionbudgets", w.namespace), {
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": w.name},
                "spec": {"maxUnavailable": mu, "selector": {"matchLabels": {"app": w.name}}}})


def workload_object(w: Workload, start: Start) -> dict[str, Any]:
    """The Deployment or DaemonSet of ``w`` with the contract's words on its Pods."""
    annotations = never_move_annotations(start.variant) if w.annotated else {}
    spec: dict[str, Any] = {"terminationGracePeriodSeconds": 0, "containers": [{
        "name": "app", "image": PAUSE,
        "resources": {"requests": {"cpu": f"{w.cpu}m", "memory": f"{w.memory}Mi"}}}]}
    if w.priority_class:
        spec["priorityClassName"] = w.priority_class
    body: dict[str, Any] = {
        "selector": {"matchLabels": {"app": w.name}},
        "template": {"metadata": {"labels": {"app": w.name}, "annotations": annotations},
                     "spec": spec}}
    if w.kind != "DaemonSet":
        body["replicas"] = w.replicas
    return {"apiVersion": "apps/v1", "kind": w.kind, "metadata": {"name": w.name},
            "spec": body}


def _bind(kube: Kube, w: Workload, targets: list[str]) -> None:
    def created() -> list[str] | None:
        pods = [p["metadata"]["name"] for p in kube.items(
            path("pods", w.namespace), label_selector=f"app={w.name}")]
        return sorted(pods) if len(pods) >= w.replicas else None
    pods = wait_for(f"{w.key}'s {w.replicas} Pods", created, timeout=60, interval=0.3)
    for pod, node in zip(pods, targets, strict=False):
        kube.create(path("pods", w.namespace, pod, sub="binding"), {
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}})


def _running(kube: Kube, start: Start, nodes: int) -> bool:
    want = sum(w.replicas for w in start.workloads if w.kind != "DaemonSet") + nodes
    pods = [p for ns in {w.namespace for w in start.workloads}
            for p in kube.items(path("pods", ns))]
    return sum(1 for p in pods if p["status"].get("phase") == "Running") >= want


def protected_keys(start: Start) -> set[str]:
    """The never-move workloads, as ``namespace/name``."""
    return {w.key for w in start.workloads if w.protection is Protection.NEVER}
