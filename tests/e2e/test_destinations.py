"""Where the real compaction scheduler puts a drain's evictee, against where the plan said.

Each case is its own pool of kwok nodes whose free room is exact (fillers are bare Pods bound
by ``nodeName``), one managed Pod on node x, the policy's real descheduler run until nothing
changes and the compaction scheduler placing every replacement. The outcome is read from the
cluster (where the Pods are) and from the controller's landing counts; the plan's status only
says why a node stays.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from compaction import names
from localcluster import Cluster, Kube
from localcluster.cluster.control_plane import NodeShape
from localcluster.cluster.kube import path, wait_for
from localcluster.cluster.process import Process
from localcluster.cluster.stack import CompactorStack

POLICY_API = "apis/compactor.dev/v1alpha1"
PLACEHOLDER_CLASS = "destinations-placeholder"
SYSTEM_NODE = "dst-system"  # the installation's own Pods, apart from every pool
FOREIGN_TAINT = {"key": "dedicated", "value": "batch", "effect": "PreferNoSchedule"}


@dataclass(frozen=True)
class Pool:
    tag: str
    namespace: str  # the managed Pod's, the only one the policy covers
    fill: str  # fillers' and placeholders', no policy's

    def node(self, at: str) -> str:
        return f"{self.tag}-{at}"

    @property
    def policy(self) -> str:
        return self.tag


@pytest.fixture(scope="module")
def scheduler(e2e_cluster: Cluster, e2e_kube: Kube, stack: CompactorStack) -> Iterator[Process]:
    """The compaction scheduler, once a policy asks for it (its ConfigMap exists then). Its
    Deployment's Pod (which kwok pretends to run) is placed on a node of its own before any
    pool exists: left Pending until a case adds its first node, it would land on that case's
    x, and a node holding a Pod of the installation's namespace is never drained."""
    e2e_cluster.add_nodes(e2e_kube, [SYSTEM_NODE], NodeShape())
    e2e_kube.apply(path("priorityclasses", name=PLACEHOLDER_CLASS,
                        api="apis/scheduling.k8s.io/v1"), {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": PLACEHOLDER_CLASS}, "value": -10,
        "preemptionPolicy": "Never"})
    e2e_kube.apply(path("clustercompactionpolicies", name="destinations-boot", api=POLICY_API), {
        "apiVersion": names.API_VERSION, "kind": "ClusterCompactionPolicy",
        "metadata": {"name": "destinations-boot"},
        "spec": {"scope": {"namespaceSelector": {"operator": "In", "values": ["none"]}},
                 "scheduler": {"useManagedScheduler": True}}})
    wait_for("the compaction scheduler's Pod placed on its own node", lambda: [
        p["spec"].get("nodeName") for p in e2e_kube.items(
            path("pods", names.INSTALL_NAMESPACE), "app.kubernetes.io/component=scheduler")
    ] == [SYSTEM_NODE], timeout=60)
    yield stack.start_scheduler()


def _pool(cluster: Cluster, kube: Kube, nodes: tuple[str, ...]) -> Pool:
    tag = f"dst-{uuid.uuid4().hex[:5]}"
    pool = Pool(tag, f"{tag}-app", f"{tag}-fill")
    for ns in (pool.namespace, pool.fill):
        kube.ensure_namespace(ns, default_service_account=True)
    # x alone first: the managed Pod is placed there by the default scheduler, as before any
    # policy; then the rest of the pool.
    cluster.add_nodes(kube, [pool.node("x")], NodeShape(), labels={"compactor.test/pool": tag})
    kube.create(path("deployments", pool.namespace), {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "app"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "app"}},
                 "template": {"metadata": {"labels": {"app": "app"}}, "spec": {
                     "nodeSelector": {"compactor.test/pool": tag},
                     "containers": [{"name": "c", "image": "pause", "resources": {
                         "requests": {"cpu": "1", "memory": "1Gi"}}}]}}}})
    wait_for("the managed Pod on x", lambda: _where(kube, pool) == [pool.node("x")])
    cluster.add_nodes(kube, [pool.node(n) for n in nodes], NodeShape(),
                      labels={"compactor.test/pool": tag})
    return pool


def _where(kube: Kube, pool: Pool) -> list[str]:
    """The nodes of the managed Pods that are Running and not leaving."""
    return sorted(p["spec"].get("nodeName", "") for p in kube.items(path("pods", pool.namespace))
                  if p["status"].get("phase") == "Running"
                  and not p["metadata"].get("deletionTimestamp"))


def _bare(kube: Kube, ns: str, name: str, node: str, cpu: str,
          priority_class: str | None = None, pinned: bool = False) -> None:
    """A Pod bound to ``node``; ``pinned``: selecting that node, so that the plan cannot move
    it (a placeholder that fits nowhere else keeps its node in use)."""
    spec: dict[str, Any] = {"nodeName": node, "containers": [{
        "name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu,
                                                                 "memory": "64Mi"}}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if pinned:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    kube.create(path("pods", ns), {"apiVersion": "v1", "kind": "Pod",
                                   "metadata": {"name": name}, "spec": spec})
    wait_for(f"{ns}/{name} running", lambda: kube.get(path("pods", ns, name))["status"].get(
        "phase") == "Running")


def _apply_policy(kube: Kube, pool: Pool) -> None:
    """The pool's policy, once the pool holds only the case's own Pods (the cases' room is
    exact; a Pod of the installation would also keep its node from any drain)."""
    foreign = [f"{p['metadata']['namespace']}/{p['metadata']['name']}"
               for p in kube.items(path("pods"))
               if p["spec"].get("nodeName", "").startswith(f"{pool.tag}-")
               and p["metadata"]["namespace"] not in (pool.namespace, pool.fill)]
    assert not foreign, f"Pods of no case on the pool's nodes: {foreign}"
    kube.apply(path("clustercompactionpolicies", name=pool.policy, api=POLICY_API), {
        "apiVersion": names.API_VERSION, "kind": "ClusterCompactionPolicy",
        "metadata": {"name": pool.policy},
        "spec": {"scope": {"namespaceSelector": {"operator": "In",
                                                 "values": [pool.namespace]}},
                 "setLabelsByEviction": False,
                 "scheduler": {"useManagedScheduler": True},
                 "descheduler": {
                     "nodeSelector": {"matchLabels": {"compactor.test/pool": pool.tag}},
                     "highNodeUtilization": {"numberOfNodes": 0, "thresholds": {
                         "cpu": 100, "memory": 100, "pods": 100}}}}})


def _plan(kube: Kube, pool: Pool) -> dict[str, Any]:
    status = kube.get(path("clustercompactionpolicies", name=pool.policy,
                           api=POLICY_API)).get("status") or {}
    return status.get("plan") or {}


def _compact(kube: Kube, stack: CompactorStack, pool: Pool, rounds: int = 12) -> int:
    """The policy's descheduler run as its CronJob would, until two runs in a row evict
    nothing; the Pods it evicted."""
    wait_for("the policy's first plan", lambda: _plan(kube, pool).get("nodesInUse"))
    evicted, quiet = 0, 0
    for _ in range(rounds):
        time.sleep(2.0)  # a controller pass (debounce 1 s, resync 2 s) since the last change
        wait_for("the managed Pod running", lambda: len(_where(kube, pool)) == 1)
        run = stack.run_descheduler(pool.policy)
        evicted += len(run.evicted)
        quiet = 0 if run.evicted else quiet + 1
        if quiet == 2:
            return evicted
    raise AssertionError(f"still evicting after {rounds} runs: {_plan(kube, pool)}")


def _probe(kube: Kube, pool: Pool, nodes: list[str]) -> str:
    """Where the compaction scheduler puts a Pod like the managed one, among ``nodes``."""
    kube.create(path("pods", pool.fill), {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"},
        "spec": {"schedulerName": names.MANAGED_SCHEDULER,
                 "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                     "nodeSelectorTerms": [{"matchExpressions": [{
                         "key": "kubernetes.io/hostname", "operator": "In",
                         "values": nodes}]}]}}},
                 "containers": [{"name": "c", "image": "pause", "resources": {
                     "requests": {"cpu": "1", "memory": "1Gi"}}}]}})
    node: str = wait_for("the probe bound", lambda: kube.get(
        path("pods", pool.fill, "probe"))["spec"].get("nodeName"))
    kube.delete(path("pods", pool.fill, "probe"))
    return node


def test_the_evictee_lands_on_the_node_the_plan_chose(
        e2e_cluster: Cluster, e2e_kube: Kube, stack: CompactorStack,
        scheduler: Process) -> None:
    """z has exactly the Pod's room, y is empty: the plan moves x's Pod to z and the scheduler
    puts it there (MostAllocated), so x is freed and y stays empty."""
    kube = e2e_kube
    pool = _pool(e2e_cluster, kube, ("y", "z"))
    _bare(kube, pool.fill, "filler", pool.node("z"), "3")
    _apply_policy(kube, pool)
    assert _compact(kube, stack, pool) == 1
    assert _where(kube, pool) == [pool.node("z")]
    assert _landings(kube, pool) == {"plannedNode": 1, "keptNode": 0, "freeNode": 0}


def _landings(kube: Kube, pool: Pool) -> dict[str, int]:
    try:
        landings: dict[str, int] = wait_for("the landing counted", lambda: _plan(
            kube, pool).get("landings") if sum((_plan(kube, pool).get("landings") or {}
                                                ).values()) else None)
    except TimeoutError as e:
        raise AssertionError(_plan(kube, pool)) from e
    return {k: landings.get(k, 0) for k in ("plannedNode", "keptNode", "freeNode")}


def test_an_untolerated_soft_taint_ranks_below_every_node_without_one(
        e2e_cluster: Cluster, e2e_kube: Kube, stack: CompactorStack,
        scheduler: Process) -> None:
    """z has exactly the Pod's room behind a foreign PreferNoSchedule taint; p holds a
    placeholder that cannot move, so p stays in use. MostAllocated alone prefers z, but the
    scheduler's TaintToleration score puts the evictee on p, and so does the plan."""
    kube = e2e_kube
    pool = _pool(e2e_cluster, kube, ("z", "p"))
    _bare(kube, pool.fill, "filler", pool.node("z"), "3")
    kube.patch(path("nodes", name=pool.node("z")), {"spec": {"taints": [FOREIGN_TAINT]}})
    _bare(kube, pool.fill, "placeholder", pool.node("p"), "500m", PLACEHOLDER_CLASS,
          pinned=True)
    _apply_policy(kube, pool)
    evicted = _compact(kube, stack, pool)
    assert (evicted, _where(kube, pool)) == (1, [pool.node("p")]), str(_plan(kube, pool))
    assert _landings(kube, pool) == {"plannedNode": 1, "keptNode": 0, "freeNode": 0}


def test_a_placeholder_node_the_scheduler_prefers_draws_no_eviction(
        e2e_cluster: Cluster, e2e_kube: Kube, stack: CompactorStack,
        scheduler: Process) -> None:
    """z has exactly the Pod's room behind a foreign PreferNoSchedule taint; p holds only a
    placeholder, which may move, so the plan counts p as free. The scheduler ranks
    untolerated soft taints above MostAllocated and would put the evictee on p: one eviction
    spent and no node saved. So nothing is evicted and x stays."""
    kube = e2e_kube
    pool = _pool(e2e_cluster, kube, ("z", "p"))
    _bare(kube, pool.fill, "filler", pool.node("z"), "3")
    kube.patch(path("nodes", name=pool.node("z")), {"spec": {"taints": [FOREIGN_TAINT]}})
    _bare(kube, pool.fill, "placeholder", pool.node("p"), "500m", PLACEHOLDER_CLASS)
    _apply_policy(kube, pool)
    evicted = _compact(kube, stack, pool)
    assert (evicted, _where(kube, pool)) == (0, [pool.node("x")]), _plan(kube, pool)
    kept = {u["node"] for u in _plan(kube, pool).get("unremovable", [])}
    assert pool.node("x") in kept, _plan(kube, pool)
    # Not a saving lost: between the two nodes the Pod could go to, the scheduler picks p.
    assert _probe(kube, pool, [pool.node("z"), pool.node("p")]) == pool.node("p")
