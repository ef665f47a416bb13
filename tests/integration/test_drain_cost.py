"""A drain pays for its evictions, on the real API server with the real descheduler: a node
whose freeing costs more than ``maxEvictionsToFreeNode`` is neither tainted nor marked, its
status says why, and the policy's rendered descheduler evicts nothing there; raised to the
cost, the same node drains."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from compaction import names
from compaction.validation import validate_policy
from controller.process.reconciler import Reconciler
from localcluster import ApiError, Cluster, Kube
from localcluster.cluster.kube import path
from tests.integration.conftest import Policies
from tests.integration.helpers import (
    descheduler_dry_run,
    evicted_in_dry_run,
    named_pods,
    with_witness,
)
from tests.integration.test_drain import _drain_taint, _kept, _setup


def _dry_run(cluster: Cluster, kube: Kube, policy: str, namespace: str, tmp_path: Path
             ) -> dict[str, tuple[str, str]]:
    """What the policy's real descheduler, from the ConfigMap the controller rendered, would
    evict now, once its snapshot held every light Pod."""
    tmp_path.mkdir()
    cm = kube.get(path("configmaps", names.INSTALL_NAMESPACE, names.descheduler_name(policy)))
    light = {f"{namespace}/{p['metadata']['name']}"
             for p in kube.items(path("pods", namespace), "app=light")}
    log = descheduler_dry_run(cluster, with_witness(yaml.safe_load(cm["data"]["policy.yaml"])),
                              tmp_path, lambda text: light <= named_pods(text))
    return evicted_in_dry_run(log)


@pytest.mark.asyncio
async def test_a_node_costing_more_evictions_than_the_limit_is_not_drained(
        cluster: Cluster, kube: Kube, namespace: str, workloads: Cluster,
        compaction_policies: Policies, in_process_reconciler: Reconciler,
        tmp_path: Path) -> None:
    pool, dense, sparse = _setup(cluster, kube, namespace)  # two light Pods on sparse
    name = compaction_policies.make(namespace, {"descheduler": {
        "nodeSelector": {"matchLabels": {"compactor.test/pool": pool}},
        "highNodeUtilization": {"thresholds": {"cpu": 90, "memory": 90, "pods": 90}},
        "maxEvictionsToFreeNode": 1}})
    summary = await in_process_reconciler.reconcile()
    assert not summary.errors, summary.errors
    assert _kept(kube, compaction_policies, name, namespace, sparse) == [
        "freeing the node costs 2 evictions, above maxEvictionsToFreeNode 1"]
    plan = kube.get(compaction_policies.path(name))["status"]["plan"]
    assert (plan["freeable"], plan["draining"], plan["evictionsToFree"]) == (0, 0, [])
    assert _dry_run(cluster, kube, name, namespace, tmp_path / "held") == {}

    # The limit was all that held it: at the cost, the node drains, and the descheduler
    # evicts the Pod the plan marked there.
    kube.patch(compaction_policies.path(name),
               {"spec": {"descheduler": {"maxEvictionsToFreeNode": 2}}})
    summary = await in_process_reconciler.reconcile()
    assert not summary.errors, summary.errors
    taint = _drain_taint(kube, sparse)
    assert taint is not None and taint["value"] == name
    plan = kube.get(compaction_policies.path(name))["status"]["plan"]
    assert plan["drainingNodes"] == [sparse]
    assert plan["evictionsToFree"] == [{"node": sparse, "evictions": 2}]
    (marked,) = [f"{namespace}/{p['metadata']['name']}"
                 for p in kube.items(path("pods", namespace), "app=light")
                 if names.DRAINING_LABEL in p["metadata"]["labels"]]
    assert set(_dry_run(cluster, kube, name, namespace, tmp_path / "drains")) == {marked}


@pytest.mark.parametrize("value", [-1, "3", 2.5])
def test_the_api_server_refuses_a_limit_the_parser_refuses(
        kube: Kube, compaction_policies: Policies, value: object) -> None:
    spec = {"descheduler": {"maxEvictionsToFreeNode": value}}
    (problem,) = validate_policy({"kind": "ClusterCompactionPolicy",
                                  "metadata": {"name": "p"}, "spec": spec})
    assert problem.path == "spec.descheduler.maxEvictionsToFreeNode"
    with pytest.raises(ApiError) as refused:
        compaction_policies.make("default", spec)
    assert refused.value.status == 422
    assert "spec.descheduler.maxEvictionsToFreeNode" in refused.value.message


def test_a_limit_of_zero_is_stored(kube: Kube, compaction_policies: Policies) -> None:
    name = compaction_policies.make("default", {"descheduler": {"maxEvictionsToFreeNode": 0}})
    stored = kube.get(compaction_policies.path(name))
    assert stored["spec"]["descheduler"]["maxEvictionsToFreeNode"] == 0
