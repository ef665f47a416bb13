"""The compaction scheduler outlives the last policy that used it while any Pod still waits
for it, on the real API server with the real kube-scheduler started from the controller's
ConfigMap (kwok nodes run no containers; the process stands for the Deployment's Pod)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from compaction import names
from controller.process.reconciler import Reconciler
from localcluster import Cluster, Kube
from localcluster.cluster.control_plane import NodeShape
from localcluster.cluster.kube import path, wait_for
from localcluster.cluster.process import Process
from localcluster.cluster.stack import local_scheduler_config
from tests.integration.conftest import Policies
from tests.integration.helpers import clear_waiting_on_compaction_scheduler

NS = names.INSTALL_NAMESPACE


@pytest.fixture
def scheduler_process(cluster: Cluster) -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for proc in started:
        proc.stop()
        cluster.processes.remove(proc)


def _start_from_configmap(cluster: Cluster, kube: Kube, workdir: Path) -> Process:
    cm = kube.get(path("configmaps", NS, names.SCHEDULER_CONFIGMAP))
    config = local_scheduler_config(yaml.safe_load(cm["data"]["config.yaml"]), cluster.kubeconfig)
    file = workdir / "compactor-scheduler.yaml"
    file.write_text(yaml.safe_dump(config))
    return cluster.start_scheduler(name=f"compactor-scheduler-{uuid.uuid4().hex[:4]}",
                                   config=file)


def _exists(kube: Kube, kind: str, name: str) -> bool:
    plural = {"Deployment": "deployments", "ConfigMap": "configmaps"}[kind]
    return kube.find(path(plural, NS, name)) is not None


def _events(kube: Kube, reason: str) -> list[dict[str, Any]]:
    return [e for e in kube.items(path("events", NS)) if e["reason"] == reason]


@pytest.mark.asyncio
async def test_a_disabled_policys_scheduler_stays_until_its_pending_pod_is_scheduled(
        cluster: Cluster, kube: Kube, namespace: str, workloads: Cluster,
        compaction_policies: Policies, in_process_reconciler: Reconciler,
        scheduler_process: list[Process], tmp_path: Path) -> None:
    name = compaction_policies.make(namespace)
    summary = await in_process_reconciler.reconcile()
    assert not summary.errors, summary.errors
    scheduler_process.append(_start_from_configmap(cluster, kube, tmp_path))

    # A Pod for the compaction scheduler that no node has room for yet (the node it
    # selects is not there: an autoscaler would bring it).
    room = f"room-{uuid.uuid4().hex[:6]}"
    kube.create(path("pods", namespace), {"metadata": {"name": "waiting"}, "spec": {
        "schedulerName": names.MANAGED_SCHEDULER,
        "nodeSelector": {"compactor.test/room": room},
        "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
        "containers": [{"name": "c", "image": "registry.invalid/none",
                        "resources": {"requests": {"cpu": "100m"}}}]}})
    wait_for("the Pod judged unschedulable", lambda: any(
        c.get("reason") == "Unschedulable" for c in kube.get(path(
            "pods", namespace, "waiting")).get("status", {}).get("conditions") or []))

    # The last policy that used the scheduler is disabled: the scheduler stays, and says why.
    kube.patch(compaction_policies.path(name), {"spec": {"enabled": False}})
    summary = await in_process_reconciler.reconcile()
    assert not summary.errors, summary.errors
    assert _exists(kube, "Deployment", "compactor-scheduler")
    assert _exists(kube, "ConfigMap", names.SCHEDULER_CONFIGMAP)
    (kept,) = _events(kube, "CompactionSchedulerKept")[:1]
    # This one, and any other test left unbound on it.
    waiting = re.search(r"but (\d+) unbound Pod\(s\)", kept["message"])
    assert waiting is not None and int(waiting.group(1)) >= 1, kept["message"]

    # Room comes: the compaction scheduler binds the Pod.
    cluster.add_nodes(kube, [room], NodeShape(), labels={"compactor.test/room": room})
    wait_for("the Pod scheduled", lambda: kube.get(path("pods", namespace, "waiting"))[
        "spec"].get("nodeName") == room, timeout=60)

    # Nothing waits for it any more (other tests' leftovers aside): it goes, with an Event.
    clear_waiting_on_compaction_scheduler(kube, keep=namespace)
    summary = await in_process_reconciler.reconcile()
    assert not summary.errors, summary.errors
    assert not _exists(kube, "Deployment", "compactor-scheduler")
    assert not _exists(kube, "ConfigMap", names.SCHEDULER_CONFIGMAP)
    assert _events(kube, "CompactionSchedulerRemoved")
