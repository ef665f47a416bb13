"""The compaction scheduler's extender for real: kube-scheduler with the rendered configuration
calls ``compactor-extender`` (run with the scheduler's own ServiceAccount, as in its Pod), and a
drained Pod's replacement lands on the node the plan sent it to, whichever way the scheduler's
own scores lean or tie; never past a soft taint, and never held by an extender that is down."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from compaction import names
from controller.components.scheduler import render_scheduler_config
from localcluster import Cluster, Kube
from localcluster.cluster.control_plane import ROOT
from localcluster.cluster.kube import path, wait_for
from localcluster.cluster.process import Process, free_port
from localcluster.cluster.stack import (
    RunningExtender,
    apply_file,
    local_scheduler_config,
    service_account_token,
    start_extender,
    token_kubeconfig,
)
from tests.integration.helpers import own_pool

FINALIZER = "compactor.test/hold"


@pytest.fixture
def pool(cluster: Cluster, kube: Kube, workloads: Cluster) -> tuple[str, list[str]]:
    """Two empty nodes of one shape in a pool of their own: the scheduler's scores tie."""
    return own_pool(cluster, kube, ("a", "b"))


@pytest.fixture
def account(cluster: Cluster, kube: Kube, tmp_path: Path) -> Path:
    """The compaction scheduler's ServiceAccount with deploy/'s RBAC, as a kubeconfig."""
    kube.ensure_namespace(names.INSTALL_NAMESPACE)
    apply_file(kube, ROOT / "deploy" / "rbac" / "scheduler.yaml")
    token = service_account_token(kube, names.INSTALL_NAMESPACE, names.MANAGED_SCHEDULER)
    return token_kubeconfig(cluster, token, tmp_path / "scheduler.kubeconfig")


@pytest.fixture
def extender(cluster: Cluster, account: Path, tmp_path: Path) -> Iterator[RunningExtender]:
    running = start_extender(cluster, account, tmp_path)
    yield running
    running.process.stop()
    cluster.processes.remove(running.process)


def start_scheduler(cluster: Cluster, account: Path, extender_url: str, workdir: Path
                    ) -> tuple[Process, str]:
    """The rendered configuration under a profile name of its own (no other test's Pods),
    its extender at ``extender_url``."""
    config = local_scheduler_config(render_scheduler_config(), account, extender_url)
    config["leaderElection"] = {"leaderElect": False}
    name = f"compactor-scheduler-{uuid.uuid4().hex[:5]}"
    config["profiles"][0]["schedulerName"] = name
    file = workdir / "scheduler.yaml"
    file.write_text(yaml.safe_dump(config))
    return cluster.start_scheduler(name=name, config=file), name


def owner(kube: Kube, namespace: str) -> dict[str, Any]:
    """A real object to stand for the Pods' controller (only its uid is matched)."""
    cm = kube.create(path("configmaps", namespace), {"metadata": {"name": "web"}})
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": "web",
            "uid": cm["metadata"]["uid"], "controller": True}


def depart(kube: Kube, extender: RunningExtender, namespace: str, ref: dict[str, Any],
           name: str, planned: str) -> None:
    """A Pod the controller marked, deleted and held Terminating by a finalizer, as an
    eviction leaves it; returns once the extender has seen it leave."""
    def marked() -> float:
        return extender.metric("compactor_owner_watch_objects", kind="Pod")
    before = marked()
    kube.create(path("pods", namespace), {
        "metadata": {"name": name, "ownerReferences": [ref], "finalizers": [FINALIZER],
                     "labels": {names.DRAINING_LABEL: "team"},
                     "annotations": {names.PLANNED_NODE_ANNOTATION: planned}},
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "x"}]}})
    wait_for("the extender to see the mark", lambda: marked() == before + 1, interval=0.1)
    kube.delete(path("pods", namespace, name))
    wait_for("the extender to see the departure", lambda: marked() == before, interval=0.1)


def replace(kube: Kube, namespace: str, ref: dict[str, Any], name: str, scheduler: str,
            pool_name: str) -> str:
    kube.create(path("pods", namespace), {
        "metadata": {"name": name, "ownerReferences": [ref]},
        "spec": {"schedulerName": scheduler, "nodeSelector": {"compactor.test/pool": pool_name},
                 "containers": [{"name": "c", "image": "x",
                                 "resources": {"requests": {"cpu": "100m"}}}]}})
    bound: str = wait_for(f"{name} bound", lambda: kube.get(
        path("pods", namespace, name))["spec"].get("nodeName"), timeout=30)
    return bound


def release(kube: Kube, namespace: str) -> None:
    for pod in kube.items(path("pods", namespace)):
        if FINALIZER in (pod["metadata"].get("finalizers") or []):
            kube.patch(path("pods", namespace, pod["metadata"]["name"]),
                       {"metadata": {"finalizers": None}})


def test_a_replacement_lands_on_its_planned_node_whether_scores_tie_or_lean_away(
        cluster: Cluster, kube: Kube, namespace: str, pool: tuple[str, list[str]],
        account: Path, extender: RunningExtender, tmp_path: Path) -> None:
    pool_name, (a, b) = pool
    proc, scheduler = start_scheduler(cluster, account, extender.url, tmp_path)
    ref = owner(kube, namespace)
    try:
        # First a tie (both nodes empty), then plans that alternate, so that every other one
        # sends the Pod to the emptier node, which MostAllocated alone would never choose.
        plans = [b, a, b, a, a, b, a, b]
        landed = []
        for i, planned in enumerate(plans):
            depart(kube, extender, namespace, ref, f"old-{i}", planned)
            landed.append(replace(kube, namespace, ref, f"new-{i}", scheduler, pool_name))
        assert landed == plans
        assert extender.metric("compactor_extender_requests_total",
                               outcome="planned") == len(plans)
        # A soft taint still decides first: a planned node that carries one loses to a node
        # without, however the extender scores it.
        kube.patch(path("nodes", name=a), {"spec": {"taints": [{
            "key": "compactor.dev/drain", "value": "team", "effect": "PreferNoSchedule"}]}})
        depart(kube, extender, namespace, ref, "old-tainted", a)
        assert replace(kube, namespace, ref, "new-tainted", scheduler, pool_name) == b
    finally:
        release(kube, namespace)
        kube.patch(path("nodes", name=a), {"spec": {"taints": None}})
        proc.stop()
        cluster.processes.remove(proc)


def test_a_pod_is_scheduled_while_the_extender_is_down(
        cluster: Cluster, kube: Kube, namespace: str, pool: tuple[str, list[str]],
        account: Path, tmp_path: Path) -> None:
    pool_name, nodes = pool
    # A port nothing listens on: every call to the extender is refused.
    proc, scheduler = start_scheduler(cluster, account, f"http://127.0.0.1:{free_port()}",
                                      tmp_path)
    ref = owner(kube, namespace)
    try:
        assert replace(kube, namespace, ref, "alone", scheduler, pool_name) in nodes
    finally:
        proc.stop()
        cluster.processes.remove(proc)
