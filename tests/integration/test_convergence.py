"""setLabelsByEviction and loop suppression on the real cluster: controller manager, kwok,
the compaction kube-scheduler and the real webhook process."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

import pytest
import pytest_asyncio
import yaml

from controller.act.metrics import ControllerMetrics
from controller.components.scheduler import render_scheduler_config
from controller.kubeapi.client import Api
from controller.process.reconciler import Reconciler
from localcluster import Cluster, Kube
from localcluster.cluster.kube import path, wait_for
from localcluster.cluster.stack import local_scheduler_config
from tests.integration.helpers import (
    HARNESS_PLAN,
    ROOT,
    WEBHOOK_NAMESPACE_LABEL,
    AheadClock,
    RunningWebhook,
    deployment,
    run_webhook,
    running_pods,
)

API = "apis/compactor.dev/v1alpha1"
CRD = ROOT / "deploy" / "crds" / "compactor.dev_clustercompactionpolicies.yaml"


def _ccp(name: str | None = None) -> str:
    return path("clustercompactionpolicies", name=name, api=API)


@pytest.fixture(scope="module")
def stack(cluster: Cluster, kube: Kube, workloads: Cluster, nodes: list[str],
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningWebhook]:
    """CRD, the compaction scheduler and the webhook (short negative TTL, see docs/install.md)."""
    obj = yaml.safe_load(CRD.read_text())
    kube.apply(path("customresourcedefinitions", name=obj["metadata"]["name"]), obj)
    wait_for("CRD served", lambda: kube.get(f"/{API}").get("resources"))
    kube.ensure_namespace("compactor-system")
    workdir = tmp_path_factory.mktemp("convergence")
    config = workdir / "scheduler.yaml"
    config.write_text(yaml.safe_dump(local_scheduler_config(render_scheduler_config(),
                                                           cluster.kubeconfig)))
    sched = cluster.start_scheduler(name="compactor-scheduler", config=config)
    try:
        with run_webhook(cluster, kube, workdir, extra_env={
                "COMPACTOR_WEBHOOK_NEGATIVE_TTL_SECONDS": "0.5"}) as hook:
            yield hook
    finally:
        sched.stop()
        cluster.processes.remove(sched)


@pytest.fixture
def policy(kube: Kube) -> Iterator[dict[str, Any]]:
    made: dict[str, Any] = {}
    yield made
    if "name" in made:
        kube.delete(_ccp(made["name"]))


def _make_policy(kube: Kube, made: dict[str, Any], namespace: str,
                 descheduler: dict[str, Any] | None = None) -> str:
    name = f"conv-{uuid.uuid4().hex[:6]}"
    kube.create(_ccp(), {"apiVersion": "compactor.dev/v1alpha1",
                         "kind": "ClusterCompactionPolicy", "metadata": {"name": name},
                         "spec": {"scope": {"namespaceSelector": {"operator": "In",
                                                                  "values": [namespace]}},
                                  "setLabelsByEviction": True,
                                  "descheduler": descheduler or {}}})
    made["name"] = name
    return name


@pytest_asyncio.fixture
async def controller(cluster: Cluster) -> AsyncIterator[Reconciler]:
    api = await Api.connect(str(cluster.kubeconfig))
    yield _reconciler(api)
    await api.close()


def _reconciler(api: Api, clock: AheadClock | None = None) -> Reconciler:
    metrics = ControllerMetrics()
    # A one-second grace instead of 35 s: this webhook's owner cache expires in 0.5 s.
    return Reconciler(api, replace(HARNESS_PLAN,
                                        intent_grace=datetime.timedelta(seconds=1)),
                      metrics=metrics, clock=clock or AheadClock())


def _metric(rec: Reconciler, name: str, **labels: str) -> float:
    return rec.metrics.registry.get_sample_value(name, labels) or 0.0


def _pods(kube: Kube, ns: str, app: str) -> list[dict[str, Any]]:
    return [p for p in kube.items(path("pods", ns), f"app={app}")
            if not p["metadata"].get("deletionTimestamp")]


def _label(kube: Kube, ns: str, name: str, key: str) -> str | None:
    labels = kube.get(path("deployments", ns, name))["metadata"].get("labels") or {}
    return labels.get(key)


def _alone_then_a_fuller_node(cluster: Cluster, kube: Kube, namespace: str, app: str,
                              replicas: int) -> None:
    """``app``'s Pods placed by the default scheduler on the one node of a pool of their own,
    then a fuller node joins it: the plan frees the first node, and the compaction scheduler
    would put every replacement on the second."""
    pool = f"conv-{uuid.uuid4().hex[:5]}"
    cluster.add_nodes(kube, [f"{pool}-a"], labels={"compactor.test/pool": pool})
    made = deployment(app, replicas)
    made["spec"]["template"]["spec"]["nodeSelector"] = {"compactor.test/pool": pool}
    kube.create(path("deployments", namespace), made)
    wait_for(f"{replicas} running",
             lambda: running_pods(kube, namespace, f"app={app}", replicas))
    cluster.add_nodes(kube, [f"{pool}-b"], labels={"compactor.test/pool": pool})
    kube.create(path("pods", namespace), {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "filler"},
        "spec": {"nodeName": f"{pool}-b", "containers": [{
            "name": "c", "image": "pause", "resources": {"requests": {"cpu": "3"}}}]}})
    wait_for("the filler running", lambda: kube.get(path("pods", namespace, "filler"))[
        "status"].get("phase") == "Running")


@pytest.mark.asyncio
async def test_pods_created_before_the_policy_are_replaced_one_at_a_time(
        cluster: Cluster, stack: RunningWebhook, kube: Kube, namespace: str,
        policy: dict[str, Any], controller: Reconciler) -> None:
    """Placed by the default scheduler on the one node of their pool, then a fuller node
    joins it: the compaction scheduler would put every replacement there, so the hook
    replaces each (it leaves alone a Pod whose replacement would come back)."""
    kube.patch(path("namespaces", name=namespace),
               {"metadata": {"labels": {WEBHOOK_NAMESPACE_LABEL: "on"}}})
    _alone_then_a_fuller_node(cluster, kube, namespace, "legacy", 3)
    _make_policy(kube, policy, namespace)

    # Counted as the Deployment counts its maxUnavailable: replicas short of Running Pods not
    # being deleted. One Pod in replacement can show as two not-running Pods at once (the
    # evicted one still terminating, its replacement still Pending), yet only one is missing.
    most_unavailable = 0
    for _ in range(240):
        await controller.reconcile()
        everything = kube.items(path("pods", namespace), "app=legacy")
        available = [p for p in everything if p["status"].get("phase") == "Running"
                     and not p["metadata"].get("deletionTimestamp")]
        most_unavailable = max(most_unavailable, 3 - len(available))
        live = _pods(kube, namespace, "legacy")
        if len(live) == 3 and len(available) == len(everything) == 3 and all(
                p["spec"]["schedulerName"] == "compactor-scheduler" for p in live):
            break
        await asyncio.sleep(0.25)
    live = _pods(kube, namespace, "legacy")
    assert [p["spec"]["schedulerName"] for p in live] == ["compactor-scheduler"] * 3
    assert all(p["metadata"]["labels"]["compactor.dev/policy"] == policy["name"] for p in live)
    assert most_unavailable <= 1, "the hook replaces one Pod at a time per workload"
    assert _metric(controller, "compactor_runtime_evictions_total", result="evicted") >= 3
    assert _label(kube, namespace, "legacy", "compactor.dev/suppressed") is None


@pytest.mark.asyncio
async def test_a_pdb_with_max_unavailable_zero_keeps_the_hook_away_and_nothing_is_deleted(
        stack: RunningWebhook, kube: Kube, namespace: str, policy: dict[str, Any],
        controller: Reconciler) -> None:
    """The budget keeps the Pods' nodes in use, so the hook, which replaces only the Pods of
    the nodes the plan frees, never tries them; the policy's status says why each stays."""
    kube.create(path("deployments", namespace), deployment("guarded", 2))
    wait_for("2 running", lambda: running_pods(kube, namespace, "app=guarded", 2))
    kube.create(path("poddisruptionbudgets", namespace), {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "guarded"}}}})
    wait_for("PDB judged", lambda: kube.get(path("poddisruptionbudgets", namespace, "pdb"))
             ["status"].get("currentHealthy") == 2)
    guarded = _pods(kube, namespace, "guarded")
    uids = {p["metadata"]["uid"] for p in guarded}
    name = _make_policy(kube, policy, namespace)
    for _ in range(6):
        await controller.reconcile()
        await asyncio.sleep(0.3)
    assert {p["metadata"]["uid"] for p in _pods(kube, namespace, "guarded")} == uids
    assert _metric(controller, "compactor_runtime_evictions_total", result="pdb_blocked") == 0
    assert _metric(controller, "compactor_runtime_evictions_total", result="evicted") == 0
    unremovable = {u["node"]: u["reasons"] for u in
                   kube.get(_ccp(name))["status"]["plan"]["unremovable"]}
    for node in {p["spec"]["nodeName"] for p in guarded}:
        assert any("PodDisruptionBudget" in r for r in unremovable[node]), unremovable.get(node)


@pytest.mark.asyncio
async def test_replacements_that_never_converge_are_suppressed_then_released(
        stack: RunningWebhook, cluster: Cluster, kube: Kube, namespace: str,
        policy: dict[str, Any], controller: Reconciler) -> None:
    # This namespace is not served by the webhook, as during an outage with failurePolicy
    # Ignore: every replacement comes back exactly as unlabelled as the Pod it replaced.
    # Alone on a node the plan frees: the hook replaces only the Pods of such nodes.
    _alone_then_a_fuller_node(cluster, kube, namespace, "stuck", 1)
    # Long enough to outlast every step below; the restarted controller's clock skips it.
    # Replacements replaced at once (evictReplacementsAfter 0s): the loop is found in seconds.
    name = _make_policy(kube, policy, namespace, {
        "loopDetectionThreshold": 2, "loopDetectionWindow": "10m", "suppressionDuration": "1m",
        "evictReplacementsAfter": "0s"})

    for _ in range(160):
        await controller.reconcile()
        if _label(kube, namespace, "stuck", "compactor.dev/suppressed") == "true":
            break
        await asyncio.sleep(0.25)
    assert _label(kube, namespace, "stuck", "compactor.dev/suppressed") == "true"
    evicted = _metric(controller, "compactor_runtime_evictions_total", result="evicted")
    assert evicted == 2, "the original Pod, then one replacement; the second came back the same"
    assert _metric(controller, "compactor_suppressions_total") == 1
    events = [e["reason"] for e in kube.items(path("events", namespace))]
    assert "CompactionSuppressed" in events

    # A controller restart: a fresh reconciler with no memory keeps the suppression.
    api = await Api.connect(str(cluster.kubeconfig))
    clock = AheadClock()
    restarted = _reconciler(api, clock)
    try:
        uids = {p["metadata"]["uid"] for p in _pods(kube, namespace, "stuck")}
        await restarted.reconcile()
        await restarted.reconcile()
        assert _label(kube, namespace, "stuck", "compactor.dev/suppressed") == "true"
        assert _metric(restarted, "compactor_suppressed_workloads") == 1
        assert {p["metadata"]["uid"] for p in _pods(kube, namespace, "stuck")} == uids
        # Its Pods carry the marker the descheduler's selector excludes.
        assert all(p["metadata"]["labels"].get("compactor.dev/suppressed") == "true"
                   for p in _pods(kube, namespace, "stuck"))

        clock.ahead = datetime.timedelta(minutes=1)
        await restarted.reconcile()
        assert _label(kube, namespace, "stuck", "compactor.dev/suppressed") is None
        assert "CompactionSuppressionLifted" in [
            e["reason"] for e in kube.items(path("events", namespace))]
    finally:
        await api.close()
    assert kube.get(_ccp(name))["status"]["managedWorkloads"] == 1
