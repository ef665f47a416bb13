"""Why a node stays, where operators look, on the real API server: the Event on the Node that
``kubectl describe node`` shows, its text from the reason table, written when the reason
changes and not otherwise (several passes, and a controller restarted twice), a reason said
again as the same Event with its count moved."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from controller.kubeapi.client import Api
from controller.process.reconciler import Reconciler
from localcluster import Cluster, Kube
from localcluster.cluster.kube import path
from tests.integration.conftest import Policies
from tests.integration.helpers import HARNESS_PLAN
from tests.integration.test_drain import _setup

COST = "freeing the node costs 2 evictions, above maxEvictionsToFreeNode 1 (eviction_cost)"
HOT = "above the 1% CPU threshold (above_thresholds)"


def _told(kube: Kube, node: str) -> dict[str, tuple[int, str]]:
    """The controller's NodeKept Events on ``node``: message -> (count, resourceVersion)."""
    return {e["message"]: (e["count"], e["metadata"]["resourceVersion"])
            for e in kube.items(path("events", "default"), "app.kubernetes.io/managed-by=compactor")
            if e["involvedObject"]["kind"] == "Node" and e["involvedObject"]["name"] == node
            and e["reason"] == "NodeKept"}


async def _restarted(cluster: Cluster, passes: int = 1) -> None:
    """A new controller process: nothing remembered, everything read from the cluster."""
    api = await Api.connect(str(cluster.kubeconfig))
    try:
        restarted = Reconciler(api, HARNESS_PLAN)
        for _ in range(passes):
            summary = await restarted.reconcile()
            assert not summary.errors, summary.errors
    finally:
        await api.close()


def _thresholds(cpu: int) -> dict[str, Any]:
    return {"spec": {"descheduler": {"highNodeUtilization": {"thresholds": {
        "cpu": cpu, "memory": 90, "pods": 90}}}}}


@pytest.mark.asyncio
async def test_a_node_is_told_why_it_stays_once_per_reason_across_passes_and_restarts(
        cluster: Cluster, kube: Kube, namespace: str, workloads: Cluster,
        compaction_policies: Policies, in_process_reconciler: Reconciler) -> None:
    pool, dense, sparse = _setup(cluster, kube, namespace)  # two light Pods on sparse
    name = compaction_policies.make(namespace, {"descheduler": {
        "nodeSelector": {"matchLabels": {"compactor.test/pool": pool}},
        "highNodeUtilization": {"thresholds": {"cpu": 90, "memory": 90, "pods": 90}},
        "maxEvictionsToFreeNode": 1}})
    for _ in range(3):
        summary = await in_process_reconciler.reconcile()
        assert not summary.errors, summary.errors
    first = _told(kube, sparse)
    assert list(first) == [COST] and first[COST][0] == 1, first
    await _restarted(cluster, passes=2)
    assert _told(kube, sparse) == first, "a restart says nothing it has said"

    # Another reason: a new Event. Back to the first: that Event again, its count moved.
    kube.patch(compaction_policies.path(name), _thresholds(1))
    await in_process_reconciler.reconcile()
    await in_process_reconciler.reconcile()
    hot = _told(kube, sparse)
    assert {m: c for m, (c, _) in hot.items()} == {COST: 1, HOT: 1}, hot
    kube.patch(compaction_policies.path(name), _thresholds(90))
    await _restarted(cluster, passes=2)
    again = _told(kube, sparse)
    assert {m: c for m, (c, _) in again.items()} == {COST: 2, HOT: 1}, again
    await in_process_reconciler.reconcile()  # the first process: its memory is stale
    assert _told(kube, sparse) == again

    # Where an operator looks.
    node = kube.get(path("nodes", name=sparse))
    out = subprocess.run([str(cluster.bin / "kubectl"), f"--kubeconfig={cluster.kubeconfig}",
                          "describe", "node", node["metadata"]["name"]],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    events = out.split("Events:", 1)[1]
    assert "NodeKept" in events and COST in events and "(x2 over" in events, events
