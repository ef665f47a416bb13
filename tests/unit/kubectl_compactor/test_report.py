"""The preview's report (``kubectl_compactor.report``), as table tests of its pure parts: the order
of the freed nodes, the grouping of the nodes that stay, the bounds and the savings; and one plan
of a small spread cluster through the controller's own ``plan``."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import pytest

from compaction import packing
from compaction.workload import WorkloadType
from controller.drain_planner.drain_plan import DrainPlan, Unremovable
from controller.drain_planner.reasons import CAUSES, Code, Reason
from controller.snapshot.constraints import Constraints
from controller.snapshot.node import NodeInfo
from controller.snapshot.owner import OwnerInfo
from controller.snapshot.pod import PodInfo
from controller.snapshot.snapshot import Snapshot
from controller.snapshot.workload import WorkloadInfo, parse_workload
from kubectl_compactor import inputs, render
from kubectl_compactor import report as preview
from tests.unit.controller.drain_planner.test_planner import GI, NOW, node, pod

R_KS = Reason(Code.PROTECTED_NAMESPACE, "pod kube-system/dns is in kube-system")


R_PDB = Reason(Code.PDB, "PodDisruptionBudget shop/web allows 0 disruptions")


R_DEST = Reason(Code.DESTINATION, "takes Pods of the nodes planned to drain first")


@pytest.mark.parametrize(("lists", "expected"), [
    ([], []),
    ([("a", "b", "c")], ["a", "b", "c"]),
    ([("a", "c"), ("b", "c")], ["a", "b", "c"]),
    ([("b", "c"), ("a", "b")], ["a", "b", "c"]),  # a before b, b before c
    ([("x",), ("a", "x", "y")], ["a", "x", "y"]),
])
def test_freed_nodes_keep_the_order_of_every_policy(lists: list[tuple[str, ...]],
                                                    expected: list[str]) -> None:
    assert preview.merge_in_order(lists) == expected


@pytest.mark.parametrize(("stays", "expected"), [
    ({}, []),
    ({"n1": [R_KS], "n2": [R_KS], "n3": [R_PDB]},
     [("protected_namespace", ("n1", "n2")), ("pdb", ("n3",))]),
    # A node with two causes counts under each; ties by code.
    ({"n1": [R_PDB, R_DEST], "n2": [R_DEST]}, [("destination", ("n1", "n2")), ("pdb", ("n1",))]),
])
def test_nodes_that_stay_are_grouped_by_reason_code(
        stays: dict[str, list[Reason]], expected: list[tuple[str, tuple[str, ...]]]) -> None:
    held = preview.group(stays)
    assert [(h.code, h.nodes) for h in held] == expected
    for h in held:
        assert h.cause == CAUSES[h.code]


def test_the_two_resource_forms_of_the_local_cluster_agree() -> None:
    items = [(1000, 2), (3000, 1), (2500, 3)]
    assert packing.ffd_packing(items, 4000, 4) == packing.ffd(items, (4000, 4)) == 2
    assert packing.lower_bound(items, 4000, 4, 110) == 2
    assert packing.ffd_around({"n": (3500, 0)}, [(1000, 1)], 4000, 4) == 2


NODES = [node("n1", labels={inputs.INSTANCE_TYPE_LABEL: "m5.large"}),
         node("n2", labels={inputs.INSTANCE_TYPE_LABEL: "m5.xlarge"}),
         node("n3")]


PODS = [pod("a", "n1"), pod("b", "n1", priority=-10), pod("c", "n2"), pod("d", "n3"),
        pod("e", "n3", ns="kube-system")]


MOVED = {("shop", "a"): "n3", ("shop", "b"): "n3", ("shop", "c"): "n3"}


@pytest.mark.parametrize(("prices", "monthly", "unpriced", "hourly"), [
    (inputs.Prices(), None, None, [None, None]),
    (inputs.Prices({"m5.large": 0.1}), 73.0, ("n2",), [0.1, None]),
    (inputs.Prices({"m5.large": 0.1}, per_node=1.0), 803.0, (), [0.1, 1.0]),
    (inputs.Prices(per_node=0.5), 730.0, (), [0.5, 0.5]),
])
def test_savings_of_the_freed_nodes(prices: inputs.Prices, monthly: float | None,
                                    unpriced: tuple[str, ...] | None,
                                    hourly: list[float | None]) -> None:
    report = preview.build(Snapshot(nodes=tuple(NODES), pods=tuple(PODS)), (
        DrainPlan("p", ("n1", "n2", "n3"), ("n1", "n2"), moves=MOVED,
                  unremovable=(Unremovable("n3", (R_KS, R_DEST)),)),), prices)
    assert [f.hourly for f in report.freeable] == hourly
    if monthly is None:
        assert report.savings is None
    else:
        assert report.savings is not None
        assert report.savings.monthly == pytest.approx(monthly)
        assert report.savings.unpriced == unpriced


def test_the_report_counts_moves_evictions_and_the_nodes_after() -> None:
    report = preview.build(Snapshot(nodes=tuple(NODES), pods=tuple(PODS)), (
        DrainPlan("p", ("n1", "n2", "n3"), ("n1", "n2"), moves=MOVED,
                  unremovable=(Unremovable("n3", (R_KS, R_DEST)),),
                  costs={"n1": 1, "n2": 1}),))
    # A node's evictions are the plan's cost (its placeholder moves without one).
    assert [(f.node, f.pods, f.evictions) for f in report.freeable] == [
        ("n1", 2, 1), ("n2", 1, 1)]
    assert report.pods_to_move == 3 and report.evictions == 2
    assert report.stays == {"n3": (R_KS, R_DEST)}
    assert [h.code for h in report.held] == ["destination", "protected_namespace"]
    b = report.bounds
    assert (b.nodes_after, b.lower_bound, b.ffd) == (1, 1, 1)
    assert b.per_resource == {"cpu": 1, "memory": 1, "pods": 1}
    data = render.as_dict(report)
    assert data["freeable"][0] == {"node": "n1", "podsToMove": 2, "evictions": 1,
                                   "hourlyPrice": None}
    assert data["heldBy"][0]["count"] == 1
    assert "Could free 2 nodes" in render.text(report)


@pytest.mark.parametrize(("pods", "in_use", "capacity", "lower"), [
    # Requests of 5 CPUs on 4-CPU nodes: 2 nodes at least.
    ([pod("a", "n1", cpu=2.5), pod("b", "n2", cpu=2.5)], ("n1", "n2"),
     {"cpu": 4000, "memory": 16 * GI, "pods": 110_000}, 2),
    # A DaemonSet Pod on every node takes its share of each node first.
    ([pod("a", "n1", cpu=2), pod("b", "n2", cpu=2),
      pod("d1", "n1", cpu=1, owner=("DaemonSet", "ds")),
      pod("d2", "n2", cpu=1, owner=("DaemonSet", "ds"))], ("n1", "n2"),
     {"cpu": 3000, "memory": 15 * GI, "pods": 109_000}, 2),
    # A finished Pod holds nothing.
    ([pod("a", "n1", cpu=3), dataclasses.replace(pod("b", "n2", cpu=3), phase="Succeeded")],
     ("n1",),
     {"cpu": 4000, "memory": 16 * GI, "pods": 110_000}, 1),
])
def test_bounds_use_what_a_node_offers_the_workload_pods(
        pods: list[PodInfo], in_use: tuple[str, ...], capacity: dict[str, int],
        lower: int) -> None:
    snapshot = Snapshot(nodes=(node("n1"), node("n2")), pods=tuple(pods))
    b = preview.bounds(pods, snapshot, in_use, 0)
    assert dict(b.capacity) == capacity
    assert b.lower_bound == lower


def test_nodes_without_a_policy_to_judge_them_say_so() -> None:
    pods = (pod("a", "n1"),)
    no_policy = preview.build(Snapshot(nodes=(node("n1"),), pods=pods), ())
    assert [r.code for r in no_policy.stays["n1"]] == ["no_policy"]
    outside = preview.build(Snapshot(nodes=(node("n1"),), pods=pods),
                            (DrainPlan("p"),))
    assert [r.code for r in outside.stays["n1"]] == ["no_pool"]


def test_pods_the_simulation_does_not_judge_are_reported_with_their_reason() -> None:
    spread = Constraints(unsimulated="topology spread on zone (DoNotSchedule)")
    pods = (pod("a", "n1", constraints=spread), pod("b", "n1"))
    report = preview.build(Snapshot(nodes=(node("n1"),), pods=pods), (DrainPlan("p"),))
    assert report.unsimulated == (preview.Unsimulated(
        "shop/a", "n1", "topology spread on zone (DoNotSchedule)"),)
    assert "topology spread on zone" in render.text(report)


def policy_doc(**over: Any) -> dict[str, Any]:
    return {"apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
            "metadata": {"name": "spread"}, "spec": {}, **over}


def deployment(name: str, ns: str, replicas: int) -> WorkloadInfo:
    """A Deployment of ``replicas`` whose Pods carry ``app: <name>``."""
    w = parse_workload(WorkloadType.DEPLOYMENT, {
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}"},
        "spec": {"replicas": replicas, "template": {"metadata": {"labels": {"app": name}}}}},
        {})
    assert w is not None
    return w


def _spread(nodes: Sequence[NodeInfo]) -> list[PodInfo]:
    return [dataclasses.replace(pod(f"web-{i}", n.name, cpu=0.2, gi=0.25), owner=(
        "ReplicaSet", "web-1")) for i, n in enumerate(nodes)]


def spread_snapshot() -> Snapshot:
    nodes = (node("n1"), node("n2"), node("n3"))
    chosen = inputs.read_documents([("f#1", policy_doc(spec={
        "scope": {"namespaceSelector": {"operator": "In", "values": ["shop"]}}}))])
    return inputs.with_policies(Snapshot(
        nodes=nodes, pods=tuple(_spread(nodes)), namespaces={"shop": {}},
        workloads=(deployment("web", "shop", 3),),
        owners=(OwnerInfo("ReplicaSet", "shop", "web-1", ("Deployment", "web"), {}),)), chosen)


def test_a_spread_cluster_planned_by_the_controllers_own_plan() -> None:
    snapshot = spread_snapshot()
    report = preview.build(snapshot, preview.preview_drains(snapshot, NOW))
    assert report.policies == ("spread",)
    assert len(report.freeable) == 2 and len(report.stays) == 1
    (kept,) = report.stays
    # It takes the Pods of the node freed last; and the Pod it took from the node freed first
    # has replaced an eviction too recently to move again (evictReplacementsAfter).
    assert {r.code for r in report.stays[kept]} == {"destination", "recently_replaced"}
    assert report.bounds.nodes_after == report.bounds.lower_bound == report.bounds.ffd == 1


def test_the_plans_moves_applied_per_node() -> None:
    snapshot = spread_snapshot()
    loads = preview.loads(snapshot, preview.preview_drains(snapshot, NOW))
    assert [n.node for n in loads] == ["n1", "n2", "n3"]
    assert [n.cpu_before for n in loads] == [200, 200, 200]
    assert sorted(n.cpu_after for n in loads) == [0, 0, 600]
    assert sorted(n.memory_after for n in loads) == [0, 0, 3 * 2**30 // 4]  # bytes
    assert all(n.memory_before == 2**30 // 4 for n in loads)
    assert sum(n.cpu_after for n in loads) == sum(n.cpu_before for n in loads)


def test_the_report_module_does_no_io() -> None:
    """kubectl_compactor.report decides and formats; only kubectl_compactor.cli talks to the API
    server (as the controller's pure modules leave that to the reader and executor)."""
    probe = ("import sys, kubectl_compactor.report; "
             "print(sorted(m for m in ('controller.kubeapi.client', 'controller.read.reader', "
             "'aiohttp', 'kubernetes_asyncio') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
