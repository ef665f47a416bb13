"""The planner's drains on the real API server: the taint and the Pod labels it writes, the
status and Events it shows, how a drain ends, and a dry run that writes nothing."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from compaction import names
from controller.kubeapi.client import Api
from controller.process.reconciler import Reconciler
from localcluster import ApiError, Cluster, Kube
from localcluster.cluster.control_plane import MANUAL_STATUS, NodeShape
from localcluster.cluster.kube import path, wait_for
from tests.integration.conftest import Policies
from tests.integration.helpers import (
    HARNESS_PLAN,
    descheduler_dry_run,
    evicted_in_dry_run,
    hold_running,
    named_pods,
    pod_template,
    running_pods,
    with_witness,
)


def _pool(cluster: Cluster, kube: Kube) -> tuple[str, str, str]:
    pool = f"drain-{uuid.uuid4().hex[:5]}"
    dense, sparse = f"{pool}-dense", f"{pool}-sparse"
    cluster.add_nodes(kube, [dense, sparse], NodeShape(), labels={"compactor.test/pool": pool})
    return pool, dense, sparse


def _deployment(name: str, replicas: int, cpu: str, node: str,
                annotations: dict[str, str] | None = None) -> dict[str, Any]:
    template = pod_template({"app": name}, cpu)
    template["spec"]["nodeName"] = node
    template["metadata"]["annotations"] = annotations or {}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": template}}


def _policy(policies: Policies, ns: str, pool: str, enabled: bool = True) -> str:
    return policies.make(ns, {"descheduler": {
        "enabled": enabled,
        "nodeSelector": {"matchLabels": {"compactor.test/pool": pool}},
        "highNodeUtilization": {"thresholds": {"cpu": 90, "memory": 90, "pods": 90}}}})


def _drain_taint(kube: Kube, node: str) -> dict[str, Any] | None:
    taints = kube.get(path("nodes", name=node))["spec"].get("taints") or []
    return next((t for t in taints if t["key"] == "compactor.dev/drain"), None)


def _events(kube: Kube, kind: str, name: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in kube.items(path("events", "default"))
            if e["involvedObject"].get("kind") == kind and e["involvedObject"]["name"] == name
            and e["reason"] == reason]


def _kept(kube: Kube, policies: Policies, name: str, ns: str, node: str) -> list[str]:
    """The node is no drain's: no drain taint, none of its light Pods marked; why, as the
    policy's status says."""
    assert _drain_taint(kube, node) is None
    for pod in kube.items(path("pods", ns), "app=light"):
        assert "compactor.dev/draining" not in pod["metadata"]["labels"]
    return [r for u in kube.get(policies.path(name))["status"]["plan"]["unremovable"]
            if u["node"] == node for r in u["reasons"]]


def _setup(cluster: Cluster, kube: Kube, ns: str) -> tuple[str, str, str]:
    pool, dense, sparse = _pool(cluster, kube)
    kube.create(path("deployments", ns), _deployment("heavy", 2, "1", dense))
    kube.create(path("deployments", ns), _deployment("light", 2, "250m", sparse))
    wait_for("heavy running", lambda: running_pods(kube, ns, "app=heavy", 2))
    wait_for("light running", lambda: running_pods(kube, ns, "app=light", 2))
    return pool, dense, sparse


@pytest.mark.asyncio
async def test_the_plan_taints_the_node_it_empties_labels_its_pods_and_untaints_it_after(
        cluster: Cluster, kube: Kube, namespace: str, workloads: Cluster,
        compaction_policies: Policies, in_process_reconciler: Reconciler) -> None:
    pool, dense, sparse = _setup(cluster, kube, namespace)
    name = _policy(compaction_policies, namespace, pool)
    summary = await in_process_reconciler.reconcile()
    assert not summary.errors, summary.errors

    taint = _drain_taint(kube, sparse)
    assert taint is not None and taint["value"] == name
    assert taint["effect"] == "PreferNoSchedule" and taint.get("timeAdded")
    assert _drain_taint(kube, dense) is None
    # One Pod marked at a time: the policy's descheduler evicts one per node and run, and the
    # next is marked once it has gone, in the order the plan placed them.
    light = sorted(kube.items(path("pods", namespace), "app=light"),
                   key=lambda p: p["metadata"]["name"])
    marks = [p["metadata"]["labels"].get("compactor.dev/draining") for p in light]
    assert marks == [name, None], marks
    kube.delete(path("pods", namespace, light[0]["metadata"]["name"]))
    wait_for("the marked Pod gone", lambda: light[0]["metadata"]["name"] not in {
        p["metadata"]["name"] for p in kube.items(path("pods", namespace), "app=light")})
    await in_process_reconciler.reconcile()  # its replacement is bound to the same node
    marks = [p["metadata"]["labels"].get("compactor.dev/draining")
             for p in kube.items(path("pods", namespace), "app=light")
             if not p["metadata"].get("deletionTimestamp")]
    assert len(marks) == 2 and marks.count(name) == 1, marks
    for pod in kube.items(path("pods", namespace), "app=heavy"):
        assert "compactor.dev/draining" not in pod["metadata"]["labels"]
    plan = kube.get(compaction_policies.path(name))["status"]["plan"]
    assert (plan["nodesInUse"], plan["freeable"], plan["draining"]) == (2, 1, 1)
    assert plan["drainingNodes"] == [sparse]
    assert any("takes Pods of the nodes planned to drain first" in r
               for u in plan["unremovable"] if u["node"] == dense for r in u["reasons"])
    assert _events(kube, "Node", sparse, "NodeDrainPlanned")
    assert _events(kube, "ClusterCompactionPolicy", name, "NodeDrainPlanned")
    table = kube.request("GET", compaction_policies.path(name), headers={
        "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    cells = dict(zip([c["name"] for c in table["columnDefinitions"]], table["rows"][0]["cells"],
                     strict=True))
    assert (cells["Nodes"], cells["Freeable"], cells["Draining"]) == (2, 1, 1)

    # The drain goes on as planned while nothing changes.
    await in_process_reconciler.reconcile()
    assert _drain_taint(kube, sparse) == taint

    # Its Pods are gone (as if evicted and replaced elsewhere): drained, the taint goes.
    kube.patch(path("deployments", namespace, "light"), {"spec": {"replicas": 0}})
    wait_for("the light Pods gone", lambda: not kube.items(path("pods", namespace), "app=light"))
    await in_process_reconciler.reconcile()
    assert _drain_taint(kube, sparse) is None
    assert _events(kube, "Node", sparse, "NodeDrained")
    assert kube.get(compaction_policies.path(name))["status"]["plan"]["draining"] == 0


@pytest.mark.asyncio
async def test_with_the_descheduler_disabled_the_plan_is_shown_and_nothing_written(
        cluster: Cluster, kube: Kube, namespace: str, workloads: Cluster,
        compaction_policies: Policies, in_process_reconciler: Reconciler) -> None:
    pool, dense, sparse = _setup(cluster, kube, namespace)
    name = _policy(compaction_policies, namespace, pool, enabled=False)
    await in_process_reconciler.reconcile()
    plan = kube.get(compaction_policies.path(name))["status"]["plan"]
    assert plan["freeableNodes"] == [sparse] and plan["drainingNodes"] == []
    assert plan["draining"] == 0
    assert _drain_taint(kube, sparse) is None and _drain_taint(kube, dense) is None
    assert not any("compactor.dev/draining" in p["metadata"]["labels"]
                   for p in kube.items(path("pods", namespace)))


@pytest.mark.asyncio
async def test_a_blocker_appearing_ends_the_drain_and_says_why(
        cluster: Cluster, kube: Kube, namespace: str, workloads: Cluster,
        compaction_policies: Policies, in_process_reconciler: Reconciler) -> None:
    pool, dense, sparse = _setup(cluster, kube, namespace)
    name = _policy(compaction_policies, namespace, pool)
    await in_process_reconciler.reconcile()
    assert _drain_taint(kube, sparse) is not None
    kube.create(path("deployments", namespace), _deployment(
        "pinned", 1, "100m", sparse,
        {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}))
    wait_for("pinned running", lambda: running_pods(kube, namespace, "app=pinned", 1))
    await in_process_reconciler.reconcile()
    reasons = _kept(kube, compaction_policies, name, namespace, sparse)
    (event,) = _events(kube, "Node", sparse, "NodeNotConsolidatable")[:1]
    assert "safe-to-evict=false" in event["message"]
    assert any("safe-to-evict=false" in r for r in reasons)


@pytest.mark.asyncio
@pytest.mark.parametrize("protection", [{names.SAFE_TO_EVICT_ANNOTATION: "false"},
                                        {names.DO_NOT_DISRUPT_ANNOTATION: "true"}],
                         ids=["safe-to-evict", "do-not-disrupt"])
async def test_a_protection_added_to_a_marked_pod_is_honoured_before_the_next_descheduler_run(
        cluster: Cluster, kube: Kube, namespace: str, workloads: Cluster,
        compaction_policies: Policies, in_process_reconciler: Reconciler, tmp_path: Path,
        protection: dict[str, str]) -> None:
    """The descheduler knows neither annotation, so the mark is what must go: one pass (a
    watch event wakes it) after the annotation, the Pod is unmarked and its node untainted,
    and the policy's real descheduler then evicts nothing."""
    pool, dense, sparse = _setup(cluster, kube, namespace)
    name = _policy(compaction_policies, namespace, pool)
    await in_process_reconciler.reconcile()
    assert _drain_taint(kube, sparse) is not None
    (marked,) = [p["metadata"]["name"] for p in kube.items(path("pods", namespace), "app=light")
                 if names.DRAINING_LABEL in p["metadata"]["labels"]]
    kube.patch(path("pods", namespace, marked), {"metadata": {"annotations": protection}})
    summary = await in_process_reconciler.reconcile()
    assert not summary.errors, summary.errors
    _kept(kube, compaction_policies, name, namespace, sparse)
    cm = kube.get(path("configmaps", names.INSTALL_NAMESPACE, names.descheduler_name(name)))
    doc = yaml.safe_load(cm["data"]["policy.yaml"])
    key = f"{namespace}/{marked}"
    log = descheduler_dry_run(cluster, with_witness(doc), tmp_path,
                              lambda text: key in named_pods(text))
    assert evicted_in_dry_run(log) == {}, log[-3000:]


@pytest.mark.asyncio
async def test_a_restarted_controller_adopts_its_drain_and_clears_a_dead_policys(
        cluster: Cluster, kube: Kube, namespace: str, workloads: Cluster,
        compaction_policies: Policies, in_process_reconciler: Reconciler) -> None:
    pool, dense, sparse = _setup(cluster, kube, namespace)
    name = _policy(compaction_policies, namespace, pool)
    await in_process_reconciler.reconcile()
    taint = _drain_taint(kube, sparse)
    assert taint is not None
    api = await Api.connect(str(cluster.kubeconfig))
    try:
        restarted = Reconciler(api, HARNESS_PLAN)  # a new process: no memory
        await restarted.reconcile()
        assert _drain_taint(kube, sparse) == taint, "the same drain, since the same time"
        compaction_policies.delete(name)
        await restarted.reconcile()
    finally:
        await api.close()
    assert _drain_taint(kube, sparse) is None
    assert not any("compactor.dev/draining" in p["metadata"]["labels"]
                   for p in kube.items(path("pods", namespace)))


@pytest.mark.asyncio
async def test_two_teams_policies_drain_a_shared_node_each_evicting_only_its_own_pods(
        cluster: Cluster, kube: Kube, workloads: Cluster, compaction_policies: Policies,
        in_process_reconciler: Reconciler, tmp_path: Path) -> None:
    """Two policies, one per team's namespace, on nodes that run Pods of both: one plan
    drains the sparse node, it carries one drain taint, and each policy's real descheduler
    (its rendered config, dry run) evicts its own team's Pods there and nothing else, one
    team's at a time, in the plan's order, whichever of the two runs first."""
    pool, dense, sparse = _pool(cluster, kube)
    teams = [f"a-{uuid.uuid4().hex[:6]}", f"b-{uuid.uuid4().hex[:6]}"]
    for ns in teams:
        kube.ensure_namespace(ns, default_service_account=True)
    try:
        for ns in teams:
            kube.create(path("deployments", ns), _deployment("heavy", 1, "1", dense))
            kube.create(path("deployments", ns), _deployment("light", 1, "250m", sparse))
        for ns in teams:
            for app in ("heavy", "light"):
                def up(ns: str = ns, app: str = app) -> list[dict[str, Any]] | None:
                    return running_pods(kube, ns, f"app={app}", 1)
                wait_for(f"{app} running", up)
        ids = [_policy(compaction_policies, ns, pool) for ns in teams]
        summary = await in_process_reconciler.reconcile()
        assert not summary.errors, summary.errors

        taint = _drain_taint(kube, sparse)
        assert taint is not None and taint["value"] == min(ids), taint
        assert taint["effect"] == "PreferNoSchedule" and _drain_taint(kube, dense) is None
        light, marked = {}, {}
        for ns, policy in zip(teams, ids, strict=True):
            (pod,) = kube.items(path("pods", ns), "app=light")
            marked[policy] = pod["metadata"]["labels"].get("compactor.dev/draining")
            light[policy] = f"{ns}/{pod['metadata']['name']}"
            plan = kube.get(compaction_policies.path(policy))["status"]["plan"]
            assert plan["drainingNodes"] == [sparse], plan
            assert not any("scope" in r or "no compaction policy" in r
                           for u in plan["unremovable"] for r in u["reasons"]), plan
        # The two Pods are alike: the plan placed the one of the smaller name first.
        first = min(ids, key=lambda p: light[p].split("/", 1)[1])
        second = next(p for p in ids if p != first)
        assert marked == {first: first, second: None}, marked

        def dry_runs(order: list[str], want: dict[str, set[str]], step: str,
                     there: set[str]) -> None:
            for policy in order:
                cm = kube.get(path("configmaps", "compactor-system",
                                   f"compactor-descheduler-{policy}"))
                doc = yaml.safe_load(cm["data"]["policy.yaml"])
                args = {c["name"]: c["args"] for c in doc["profiles"][0]["pluginConfig"]}
                assert args["RemovePodsViolatingNodeTaints"]["includedTaints"] == [
                    "compactor.dev/drain"]
                work = tmp_path / f"{step}-{order.index(policy)}-{policy}"
                work.mkdir()
                # Judged once its snapshot held the teams' Pods left on the drained node.
                log = descheduler_dry_run(cluster, with_witness(doc), work,
                                          lambda log: there <= named_pods(log))
                assert set(evicted_in_dry_run(log)) == want[policy], (policy, log[-3000:])

        for order in (ids, ids[::-1]):
            dry_runs(order, {first: {light[first]}, second: set()}, "first",
                     set(light.values()))
        # The first team's Pod is gone (its replacement landed elsewhere): the second's turn.
        first_ns = light[first].split("/", 1)[0]
        kube.patch(path("deployments", first_ns, "light"), {"spec": {"replicas": 0}})
        wait_for("the first team's Pod gone", lambda: not kube.items(
            path("pods", first_ns), "app=light") or None)
        summary = await in_process_reconciler.reconcile()
        assert not summary.errors, summary.errors
        (pod,) = kube.items(path("pods", light[second].split("/", 1)[0]), "app=light")
        assert pod["metadata"]["labels"].get("compactor.dev/draining") == second
        for order in (ids, ids[::-1]):
            dry_runs(order, {first: set(), second: {light[second]}}, "second",
                     {light[second]})
    finally:
        for ns in teams:
            kube.delete(path("namespaces", name=ns))


def _budget(name: str, app: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
            "spec": {"maxUnavailable": 5, "selector": {"matchLabels": {"app": app}}}}


@pytest.mark.asyncio
async def test_a_pod_under_two_budgets_blocks_its_node_as_the_eviction_api_refuses_it(
        cluster: Cluster, kube: Kube, namespace: str, workloads: Cluster,
        compaction_policies: Policies, in_process_reconciler: Reconciler) -> None:
    """Each budget allows disruptions, yet the API server refuses every eviction of a Pod two
    of them cover: the plan must not drain a node that could never empty."""
    pool, dense, sparse = _setup(cluster, kube, namespace)
    for budget in ("light-a", "light-b"):
        kube.create(path("poddisruptionbudgets", namespace), _budget(budget, "light"))
    wait_for("both budgets counted", lambda: all(
        (kube.get(path("poddisruptionbudgets", namespace, b)).get("status") or {}).get(
            "disruptionsAllowed", 0) > 0 for b in ("light-a", "light-b")))
    pod = kube.items(path("pods", namespace), "app=light")[0]["metadata"]["name"]
    with pytest.raises(ApiError) as refused:
        kube.evict(namespace, pod)
    assert "more than one PodDisruptionBudget" in refused.value.message

    name = _policy(compaction_policies, namespace, pool)
    summary = await in_process_reconciler.reconcile()
    assert not summary.errors, summary.errors
    reasons = _kept(kube, compaction_policies, name, namespace, sparse)
    assert any(f"PodDisruptionBudgets {namespace}/light-a, {namespace}/light-b" in r
               for r in reasons), reasons


@pytest.mark.asyncio
async def test_a_draining_node_that_turns_not_ready_is_untainted_at_once(
        cluster: Cluster, kube: Kube, namespace: str, workloads: Cluster,
        compaction_policies: Policies, in_process_reconciler: Reconciler) -> None:
    """Evictions from a node whose kubelet is gone never finish: the drain stops there and
    then, not at the drain timeout."""
    pool, dense, sparse = _setup(cluster, kube, namespace)
    _policy(compaction_policies, namespace, pool)
    await in_process_reconciler.reconcile()
    assert _drain_taint(kube, sparse) is not None
    # kwok keeps the nodes it runs Ready unless told to leave a node's status alone.
    kube.patch(path("nodes", name=sparse), {"metadata": {"annotations": {MANUAL_STATUS: "manual"}}})
    node = kube.get(path("nodes", name=sparse))
    conditions = [{**c, "status": "Unknown", "reason": "NodeStatusUnknown"}
                  if c["type"] == "Ready" else c for c in node["status"]["conditions"]]
    kube.patch(path("nodes", name=sparse, sub="status"), {"status": {"conditions": conditions}},
               "strategic")
    wait_for("the node shown not ready", lambda: not any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in kube.get(path("nodes", name=sparse))["status"]["conditions"]))
    summary = await in_process_reconciler.reconcile()
    assert not summary.errors, summary.errors
    assert _drain_taint(kube, sparse) is None
    (event,) = _events(kube, "Node", sparse, "NodeNotConsolidatable")[:1]
    assert "turned not ready while it drained" in event["message"]


@pytest.mark.asyncio
async def test_room_a_terminating_statefulset_pods_replacement_needs_takes_no_planned_move(
        cluster: Cluster, kube: Kube, namespace: str, workloads: Cluster,
        compaction_policies: Policies, in_process_reconciler: Reconciler) -> None:
    """The StatefulSet recreates its Pod only once the old one is gone (held here by a
    finalizer), and kube-scheduler will want room for it then: the plan may not give that room
    to the Pods of a node it drains."""
    pool, dense, sparse = _setup(cluster, kube, namespace)
    template = pod_template({"app": "db"}, "1750m")
    template["spec"]["nodeName"] = sparse
    # Its replacement may go to the pool's nodes only (this cluster has other tests' nodes).
    template["spec"]["nodeSelector"] = {"compactor.test/pool": pool}
    # kwok would strip the finalizer below and delete the Pod at once: it leaves this one be.
    template["metadata"]["annotations"] = {MANUAL_STATUS: "manual"}
    kube.create(path("statefulsets", namespace), {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"replicas": 1, "serviceName": "db",
                 "selector": {"matchLabels": {"app": "db"}}, "template": template}})
    wait_for("db running", lambda: hold_running(kube, namespace) >= 1 and running_pods(
        kube, namespace, "app=db", 1))
    held = path("pods", namespace, "db-0")
    kube.patch(held, {"metadata": {"finalizers": ["compactor.test/hold"]}})
    kube.delete(held)
    try:
        wait_for("db-0 terminating", lambda: kube.get(held)["metadata"].get(
            "deletionTimestamp") is not None)
        name = _policy(compaction_policies, namespace, pool)
        summary = await in_process_reconciler.reconcile()
        assert not summary.errors, summary.errors
        # dense has 2 CPU free: db-0's replacement (1750m) or the light Pods (500m), not both.
        reasons = _kept(kube, compaction_policies, name, namespace, sparse)
        assert any("does not fit elsewhere" in r for r in reasons), reasons
        assert kube.get(held)["metadata"].get("deletionTimestamp"), "db-0 left too early"
    finally:
        kube.patch(held, {"metadata": {"finalizers": None}})
