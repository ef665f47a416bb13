"""Compactor beside a node the real Karpenter is taking away, and a Pod Karpenter's users
protect. Three nodes from the NodePool: ``a`` runs a Pod annotated
``karpenter.sh/do-not-disrupt: "true"``, ``b`` one Pod the plan can move, ``c`` is being
disrupted (its NodeClaim deleted, so Karpenter taints it ``karpenter.sh/disrupted``; a Pod
with do-not-disrupt of no policy keeps Karpenter from finishing, and a Pod of the policy that
tolerates the taint stays, so Karpenter's drain leaves it). The plan must free ``b`` into
``a``: never into ``c``, never from ``c``, and never evict the do-not-disrupt Pod."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from compaction import names
from localcluster import Kube
from localcluster.cluster.control_plane import NodeShape
from localcluster.cluster.karpenter import (
    DISRUPTED_TAINT,
    DO_NOT_DISRUPT,
    KARPENTER_API,
    Karpenter,
    disrupting,
    node_claims,
    pool_nodes,
    provision,
)
from localcluster.cluster.kube import path, wait_for
from localcluster.cluster.stack import CompactorStack

POLICY = "compact-shop"
SHOP, GUARD = "shop", "guard"
PAUSE = "registry.k8s.io/pause:3.10"


def _deployment(name: str, annotations: dict[str, str] | None = None,
                tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels, "annotations": annotations or {}},
                "spec": {"terminationGracePeriodSeconds": 0,
                         "tolerations": tolerations or [],
                         "containers": [{"name": "app", "image": PAUSE, "resources": {
                             "requests": {"cpu": "500m", "memory": "512Mi"}}}]}}}}


def _pods(kube: Kube, ns: str, app: str) -> list[dict[str, Any]]:
    return [p for p in kube.items(path("pods", ns), label_selector=f"app={app}")
            if not p["metadata"].get("deletionTimestamp")]


def _on(kube: Kube, node: str, nodes: list[str], ns: str, body: dict[str, Any]) -> None:
    """Create the Deployment so that its Pod lands on ``node``: every other node cordoned
    while the default scheduler places it (no selector the plan would then have to honour)."""
    others = [n for n in nodes if n != node]
    for n in others:
        kube.patch(path("nodes", name=n), {"spec": {"unschedulable": True}})
    try:
        kube.create(path("deployments", ns), body)
        app = body["metadata"]["name"]
        wait_for(f"{ns}/{app} Running on {node}", lambda: any(
            p["spec"].get("nodeName") == node and p["status"].get("phase") == "Running"
            for p in _pods(kube, ns, app)), timeout=90)
    finally:
        for n in others:
            kube.patch(path("nodes", name=n), {"spec": {"unschedulable": False}})


@pytest.fixture(scope="module")
def nodes(k_kube: Kube, karpenter: Karpenter, k_stack: CompactorStack) -> Iterator[list[str]]:
    kube = k_kube
    a, b, c = provision(kube, karpenter.pool, 3, NodeShape())
    for ns in (SHOP, GUARD):
        kube.ensure_namespace(ns, default_service_account=True)
    _on(kube, a, [a, b, c], SHOP, _deployment("keep", {DO_NOT_DISRUPT: "true"}))
    _on(kube, b, [a, b, c], SHOP, _deployment("web"))
    _on(kube, c, [a, b, c], GUARD, _deployment("hold", {DO_NOT_DISRUPT: "true"}))
    _on(kube, c, [a, b, c], SHOP, _deployment("stay", tolerations=[
        {"key": DISRUPTED_TAINT, "operator": "Exists", "effect": "NoSchedule"}]))
    claim = next(cl["metadata"]["name"] for cl in node_claims(kube)
                 if (cl.get("status") or {}).get("nodeName") == c)
    kube.delete(path("nodeclaims", name=claim, api=KARPENTER_API))
    wait_for(f"Karpenter disrupting {c}", lambda: disrupting(kube.get(path("nodes", name=c))),
             timeout=90)
    yield [a, b, c]


@pytest.fixture(scope="module")
def watched(k_kube: Kube, k_stack: CompactorStack, nodes: list[str]) -> dict[str, Any]:
    """The policy over ``shop``, then descheduler runs until ``b`` is free, watching ``c``:
    whether it ever carried the drain taint, and which Pods of the policy ran there."""
    kube = k_kube
    a, b, c = nodes
    uids = {app: _pods(kube, SHOP, app)[0]["metadata"]["uid"] for app in ("keep", "stay")}
    kube.apply(path(names.POLICY_PLURAL, None, POLICY, api=f"apis/{names.API_VERSION}"), {
        "apiVersion": names.API_VERSION, "kind": names.POLICY_KIND,
        "metadata": {"name": POLICY},
        "spec": {"scope": {"namespaceSelector": {"operator": "In", "values": [SHOP]},
                           "workloadTypes": ["Deployment"]},
                 "setLabelsByEviction": False, "scheduler": {"useManagedScheduler": True},
                 "descheduler": {"maxNoOfPodsToEvictPerNode": 5,
                                 "maxNoOfPodsToEvictPerNamespace": 5,
                                 "maxNoOfPodsToEvictTotal": 5,
                                 "highNodeUtilization": {"numberOfNodes": 0, "thresholds": {
                                     "cpu": 100, "memory": 100, "pods": 100}}}}})
    k_stack.start_scheduler()
    seen: dict[str, Any] = {"c_drain_taint": False, "on_c": set(), "statuses": []}
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        node_c = kube.get(path("nodes", name=c))
        seen["c_drain_taint"] |= any(t.get("key") == names.DRAIN_TAINT
                                     for t in node_c["spec"].get("taints") or [])
        seen["on_c"] |= {p["metadata"]["name"] for p in kube.items(path("pods", SHOP))
                         if p["spec"].get("nodeName") == c}
        status = (kube.get(path(names.POLICY_PLURAL, None, POLICY,
                                api=f"apis/{names.API_VERSION}")).get("status") or {})
        seen["statuses"].append(status.get("plan") or {})
        web = _pods(kube, SHOP, "web")
        if web and all(p["spec"].get("nodeName") == a and p["status"].get("phase") == "Running"
                       for p in web):
            break
        k_stack.run_descheduler(POLICY)
        time.sleep(1.0)
    seen["uids"] = uids
    seen["uids_after"] = {app: [p["metadata"]["uid"] for p in _pods(kube, SHOP, app)]
                          for app in ("keep", "stay")}
    seen["web_on"] = [p["spec"].get("nodeName") for p in _pods(kube, SHOP, "web")]
    seen["nodes_left"] = {n["metadata"]["name"] for n in pool_nodes(kube, "default")}
    return seen


def _reasons(plan: dict[str, Any], node: str) -> list[str]:
    return [r for u in plan.get("unremovable", []) if u["node"] == node for r in u["reasons"]]


def test_the_plan_frees_b_into_a_never_into_the_disrupted_node(
        nodes: list[str], watched: dict[str, Any]) -> None:
    a, b, c = nodes
    assert watched["web_on"] == [a], watched
    assert watched["on_c"] == {p for p in watched["on_c"] if p.startswith("stay-")}, watched


def test_compactor_never_drains_the_node_karpenter_disrupts(
        nodes: list[str], watched: dict[str, Any]) -> None:
    a, b, c = nodes
    assert not watched["c_drain_taint"], watched
    plans = [p for p in watched["statuses"] if p]
    assert plans, watched
    assert all(c not in p.get("freeableNodes", []) and c not in p.get("drainingNodes", [])
               for p in plans), plans
    assert any("node is being removed by an autoscaler" in _reasons(p, c) for p in plans), plans
    # The Pod that tolerates Karpenter's taint is still where it was: nobody evicted it.
    assert watched["uids_after"]["stay"] == [watched["uids"]["stay"]], watched


def test_do_not_disrupt_is_a_blocker(nodes: list[str], watched: dict[str, Any]) -> None:
    a, b, c = nodes
    assert watched["uids_after"]["keep"] == [watched["uids"]["keep"]], watched
    plans = [p for p in watched["statuses"] if p]
    assert any(any("karpenter.sh/do-not-disrupt" in r for r in _reasons(p, a))
               for p in plans), plans
    assert all(a not in p.get("freeableNodes", []) for p in plans), plans
