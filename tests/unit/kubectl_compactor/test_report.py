"""The preview's report (``kubectl_compactor.report``), as table tests of its pure parts: the order
of the freed nodes, the grouping of the nodes that stay, the packing bounds, the prices, and
the policy files' problems; and one plan of a small spread cluster through the controller's
own ``plan``."""

from __future__ import annotations

import dataclasses
import gc
import io
import random
import subprocess
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
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
from kubectl_compactor import cli as preview_cli
from kubectl_compactor import cluster_read, inputs, render
from kubectl_compactor import report as preview
from tests.unit.controller.drain_planner.test_planner import GI, NOW, node, pod

R_KS = Reason(Code.PROTECTED_NAMESPACE, "pod kube-system/dns is in kube-system")
R_PDB = Reason(Code.PDB, "pdb shop/web allows 0 disruptions")
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


@pytest.mark.parametrize(("items", "capacity", "lower", "ffd"), [
    ([], (4, 4), 0, 0),
    ([(1, 1)] * 4, (4, 4), 1, 1),
    ([(3, 1), (3, 1), (2, 1)], (4, 4), 2, 3),  # 8/4 = 2, but no two of 3 share a node
    ([(1, 3), (1, 3)], (4, 4), 2, 2),  # memory decides
    ([(5, 1)], (4, 4), 2, 1),  # larger than a node: it still takes one
])
def test_packing_bounds(items: list[tuple[int, int]], capacity: tuple[int, int], lower: int,
                        ffd: int) -> None:
    assert packing.lower_bound_of(items, capacity) == lower
    assert packing.ffd(items, capacity) == ffd


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
                  unremovable=(Unremovable("n3", (R_KS, R_DEST)),)),))
    assert [(f.node, f.pods, f.evictions) for f in report.freeable] == [
        ("n1", 2, 1), ("n2", 1, 1)]  # the placeholder moves without an eviction
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


def _doc(**over: Any) -> dict[str, Any]:
    return {"apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
            "metadata": {"name": "spread"}, "spec": {}, **over}


@pytest.mark.parametrize(("docs", "problems"), [
    ([_doc()], []),
    ([None, _doc()], []),
    ([_doc(apiVersion="v1")], ["f#1: ClusterCompactionPolicy/spread: apiVersion: must be "
                               "compactor.dev/v1alpha1"]),
    ([_doc(kind="ConfigMap")], ["f#1: ConfigMap/spread: kind: must be "
                                "ClusterCompactionPolicy or CompactionPolicy"]),
    ([_doc(spec={"weight": "heavy", "descheduler": {"maxNoOfPodsToEvictPerNode": -1}})],
     ["f#1: ClusterCompactionPolicy/spread: spec.weight: ",
      "f#1: ClusterCompactionPolicy/spread: spec.descheduler.maxNoOfPodsToEvictPerNode: "]),
    (["text"], ["f#1: (document): is a str, not an object"]),
])
def test_policy_documents_go_through_the_controllers_validation(
        docs: list[Any], problems: list[str]) -> None:
    chosen = inputs.read_documents((f"f#{i}", d) for i, d in enumerate(docs, 1))
    assert len(chosen.problems) == len(problems), chosen.problems
    for line, start in zip(chosen.problems, problems, strict=True):
        assert line.startswith(start), line


def test_a_namespaced_policy_without_a_namespace_lands_in_default() -> None:
    chosen = inputs.read_documents([("f#1", _doc(kind="CompactionPolicy"))])
    assert not chosen.problems
    assert chosen.policies[0].namespace == "default"


@pytest.mark.parametrize(("raw", "by_type", "problems"), [
    ({"m5.large": 0.096, "c5.xlarge": 1}, {"m5.large": 0.096, "c5.xlarge": 1.0}, 0),
    ({"m5.large": "cheap", "x": -1, "y": True}, {}, 3),
    (["m5.large"], {}, 1),
])
def test_price_files(raw: Any, by_type: dict[str, float], problems: int) -> None:
    found, said = inputs.parse_prices(raw, "prices.yaml")
    assert found == by_type and len(said) == problems


def _deployment(name: str, ns: str, replicas: int) -> WorkloadInfo:
    w = parse_workload(WorkloadType.DEPLOYMENT, {
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}"},
        "spec": {"replicas": replicas, "template": {"metadata": {"labels": {"app": name}}}}},
        {})
    assert w is not None
    return w


def _spread(nodes: Sequence[NodeInfo]) -> list[PodInfo]:
    return [dataclasses.replace(pod(f"web-{i}", n.name, cpu=0.2, gi=0.25), owner=(
        "ReplicaSet", "web-1")) for i, n in enumerate(nodes)]


def _spread_snapshot() -> Snapshot:
    nodes = (node("n1"), node("n2"), node("n3"))
    chosen = inputs.read_documents([("f#1", _doc(spec={
        "scope": {"namespaceSelector": {"operator": "In", "values": ["shop"]}}}))])
    return inputs.with_policies(Snapshot(
        nodes=nodes, pods=tuple(_spread(nodes)), namespaces={"shop": {}},
        workloads=(_deployment("web", "shop", 3),),
        owners=(OwnerInfo("ReplicaSet", "shop", "web-1", ("Deployment", "web"), {}),)), chosen)


def test_a_spread_cluster_planned_by_the_controllers_own_plan() -> None:
    snapshot = _spread_snapshot()
    report = preview.build(snapshot, preview.preview_drains(snapshot, NOW))
    assert report.policies == ("spread",)
    assert len(report.freeable) == 2 and len(report.stays) == 1
    (kept,) = report.stays
    assert {r.code for r in report.stays[kept]} == {"destination"}
    assert report.bounds.nodes_after == report.bounds.lower_bound == report.bounds.ffd == 1


def test_the_plans_moves_applied_per_node() -> None:
    snapshot = _spread_snapshot()
    loads = preview.loads(snapshot, preview.preview_drains(snapshot, NOW))
    assert [n.node for n in loads] == ["n1", "n2", "n3"]
    assert [n.cpu_before for n in loads] == [200, 200, 200]
    assert sorted(n.cpu_after for n in loads) == [0, 0, 600]
    assert sorted(n.memory_after for n in loads) == [0, 0, 3 * 2**30 // 4]  # bytes
    assert all(n.memory_before == 2**30 // 4 for n in loads)
    assert sum(n.cpu_after for n in loads) == sum(n.cpu_before for n in loads)


def test_plot_writes_a_png(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    snapshot = _spread_snapshot()
    monkeypatch.setattr(preview_cli, "read_cluster", _reads(snapshot))
    file = tmp_path / "plan.png"
    code, out, errors = preview_cli.run(["plan", "--plot", str(file)])
    assert (code, errors) == (0, [])
    assert "Could free 2 nodes" in out
    assert file.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_so(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preview_cli, "read_cluster", _reads(_spread_snapshot()))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises
    file = tmp_path / "plan.png"
    code, out, errors = preview_cli.run(["plan", "--plot", str(file)])
    assert (code, out) == (2, "")
    assert errors == ["--plot needs matplotlib (pip install matplotlib)"]
    assert not file.exists()


def _reads(snapshot: Snapshot) -> Callable[..., Coroutine[Any, Any, Snapshot]]:
    async def read(kubeconfig: str | None, context: str | None, policies: bool,
                   progress: cluster_read.Progress | None = None,
                   timeout: float = cluster_read.REQUEST_TIMEOUT,
                   page: int = cluster_read.CHUNK_SIZE) -> Snapshot:
        return snapshot
    return read


class _Terminal(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_the_progress_line_is_rewritten_in_place_on_a_terminal_and_erased() -> None:
    term = _Terminal(True)
    progress = cluster_read.Progress(term)
    progress.listed("/api/v1/nodes", 500)
    progress.listed("/api/v1/pods", 500)
    shown = term.getvalue()
    assert shown.startswith("\rlisting nodes: 500 objects read")
    assert "\rlisting pods: 1,000 objects read" in shown and "\n" not in shown
    progress.done()
    assert term.getvalue().endswith("\r" + " " * len("listing pods: 1,000 objects read") + "\r")


def test_no_progress_line_off_a_terminal() -> None:
    piped = _Terminal(False)
    progress = cluster_read.Progress(piped)
    progress.listed("/api/v1/pods", 500)
    progress.done()
    assert piped.getvalue() == "" and progress.objects == 500


def test_the_report_module_does_no_io() -> None:
    """kubectl_compactor.report decides and formats; only kubectl_compactor.cli talks to the API
    server (as the controller's pure modules leave that to the reader and executor)."""
    probe = ("import sys, kubectl_compactor.report; "
             "print(sorted(m for m in ('controller.kubeapi.client', 'controller.read.reader', "
             "'aiohttp', 'kubernetes_asyncio') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def _first_fit_decreasing(items: Sequence[tuple[int, ...]], capacity: tuple[int, ...],
                          opened: Sequence[tuple[int, ...]] = ()) -> int:
    """First fit decreasing as written in a textbook: every item scans every node."""
    bins = [list(b) for b in opened]
    for item in sorted(items, key=lambda i: max(x / c for x, c in zip(i, capacity, strict=True)
                                                if c > 0), reverse=True):
        for b in bins:
            if all(u + x <= c for u, x, c in zip(b, item, capacity, strict=True)):
                for k, x in enumerate(item):
                    b[k] += x
                break
        else:
            bins.append(list(item))
    return len(bins)


@pytest.mark.parametrize("seed", range(20))
def test_ffd_packs_as_the_textbook_first_fit_decreasing_does(seed: int) -> None:
    rng = random.Random(seed)
    shapes = [(rng.choice([50, 100, 250, 900]), rng.choice([64, 128, 512, 2048]), 1)
              for _ in range(rng.randint(1, 6))]
    items = [rng.choice(shapes) for _ in range(rng.randint(0, 400))]
    capacity = (4000, 16384, 110)
    opened = [(rng.randint(0, 3000), rng.randint(0, 9000), 3) for _ in range(rng.randint(0, 5))]
    assert packing.ffd(items, capacity, opened) == _first_fit_decreasing(items, capacity, opened)


def test_a_negative_request_timeout_or_chunk_size_is_refused_before_anything_is_read() -> None:
    code, out, errors = preview_cli.run(["plan", "--request-timeout", "-1"])
    assert (code, out, errors) == (2, "", ["--request-timeout: must be >= 0"])
    code, out, errors = preview_cli.run(["plan", "--chunk-size", "-1"])
    assert (code, out, errors) == (2, "", ["--chunk-size: must be >= 0"])


def test_a_snapshot_shows_its_counts_not_its_records() -> None:
    """asyncio formats the result of the task that read it: with 150,000 Pods, seconds."""
    snapshot = Snapshot(nodes=tuple(NODES), pods=tuple(PODS))
    shown = repr(snapshot)
    assert "nodes=3," in shown and f"pods={len(PODS)}," in shown
    assert "PodInfo" not in shown and "NodeInfo" not in shown


def test_the_cluster_is_read_without_cyclic_collections_and_then_frozen_out_of_them() -> None:
    assert gc.isenabled()
    try:
        with cluster_read.bulk_read():
            assert not gc.isenabled()
            kept = [{"pod": i} for i in range(1000)]
        assert gc.isenabled() and gc.get_freeze_count() >= len(kept)
    finally:
        gc.unfreeze()
