"""What would free more (``kubectl_compactor.counterfactual``): table tests of the pure ranking
(which reason is which lever, which levers a node counts for, the estimate's cap), and small
clusters planned again by the controller's own planner with each lever lifted."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from compaction import names
from compaction.selector import parse_selector
from controller.drain_planner.reasons import Code, Reason
from controller.plan.decide import Lift
from controller.snapshot.owner import OwnerInfo
from controller.snapshot.pdb import PdbInfo
from controller.snapshot.pod import PodInfo
from controller.snapshot.snapshot import Snapshot
from kubectl_compactor import inputs, render
from kubectl_compactor import report as preview
from kubectl_compactor.counterfactual import (
    Candidate,
    Kind,
    Lever,
    candidates,
    estimate,
    lever_of,
    relax,
)
from tests.unit.controller.drain_planner.test_planner import NOW, node, pod
from tests.unit.kubectl_compactor.test_report import deployment

WORKLOADS = {("shop", "web"): "Deployment shop/web", ("shop", "cache"): "StatefulSet shop/cache"}


def _workload(namespace: str, name: str) -> str | None:
    return WORKLOADS.get((namespace, name))


PDB = Reason(Code.PDB, "PodDisruptionBudget shop/db allows 0 disruptions")
SAFE = Reason(Code.SAFE_TO_EVICT, "pod shop/web safe-to-evict=false")
DND = Reason(Code.DO_NOT_DISRUPT, "pod shop/cache is annotated karpenter.sh/do-not-disrupt")
KS = Reason(Code.PROTECTED_NAMESPACE, "pod kube-system/dns is in kube-system")
OWN = Reason(Code.PROTECTED_NAMESPACE, f"pod {names.INSTALL_NAMESPACE}/sched is in "
             f"{names.INSTALL_NAMESPACE}")
TWO = Reason(Code.MULTIPLE_PDBS, "pod shop/web is matched by PodDisruptionBudgets shop/a, "
             "shop/b: the Eviction API refuses a Pod under more than one")
HOT = Reason(Code.ABOVE_THRESHOLDS, "above the 65% CPU threshold")
HOT_P = Reason(Code.ABOVE_THRESHOLDS, "policy q: above the 65% CPU threshold")
COST = Reason(Code.EVICTION_COST, "freeing the node costs 3 evictions, above "
              "maxEvictionsToFreeNode 2")
DEST = Reason(Code.DESTINATION, "takes Pods of the nodes planned to drain first")


@pytest.mark.parametrize(("reason", "policies", "lever"), [
    (PDB, ["p"], Lever(Kind.PDB, "shop/db")),
    (SAFE, ["p"], Lever(Kind.ANNOTATION, "Deployment shop/web",
                        names.SAFE_TO_EVICT_ANNOTATION)),
    (DND, ["p"], Lever(Kind.ANNOTATION, "StatefulSet shop/cache",
                       names.DO_NOT_DISRUPT_ANNOTATION)),
    (KS, ["p"], Lever(Kind.SYSTEM_PODS, "kube-system")),
    (HOT, ["p"], Lever(Kind.THRESHOLDS, "p")),
    (HOT_P, ["p", "q"], Lever(Kind.THRESHOLDS, "q")),  # several policies: the one it names
    (COST, ["p"], Lever(Kind.MAX_EVICTIONS, "p")),
    # Compactor's own rules are no lever: its install namespace, a Pod under two budgets.
    (OWN, ["p"], None),
    (TWO, ["p"], None),
    # Nor what no setting lifts.
    (DEST, ["p"], None),
    (Reason(Code.DOES_NOT_FIT, "pod shop/web fits on no other node"), ["p"], None),
    # A threshold of an unnamed policy among several is no one's.
    (HOT, ["p", "q"], None),
], ids=["pdb", "safe-to-evict", "do-not-disrupt", "kube-system", "thresholds",
        "thresholds-of-one-of-two", "max-evictions", "install-namespace", "two-pdbs",
        "destination", "does-not-fit", "thresholds-unnamed"])
def test_each_reason_is_the_lever_that_lifts_it(reason: Reason, policies: list[str],
                                                lever: Lever | None) -> None:
    assert lever_of(reason, policies, _workload) == lever


@pytest.mark.parametrize(("stays", "expected"), [
    ({}, []),
    # Alone on two nodes beats alone on one; a node with two levers counts alone for none.
    ({"n1": [PDB], "n2": [PDB, PDB], "n3": [SAFE], "n4": [SAFE, PDB]},
     [(Lever(Kind.PDB, "shop/db"), ("n1", "n2"), ("n1", "n2", "n4")),
      (Lever(Kind.ANNOTATION, "Deployment shop/web", names.SAFE_TO_EVICT_ANNOTATION), ("n3",),
       ("n3", "n4"))]),
    # A reason no lever lifts keeps the node whatever is relaxed: touched, not alone.
    ({"n1": [KS, DEST], "n2": [KS]},
     [(Lever(Kind.SYSTEM_PODS, "kube-system"), ("n2",), ("n1", "n2"))]),
    ({"n1": [OWN], "n2": [TWO]}, []),
    # Ties: the lever touching more nodes first.
    ({"n1": [HOT], "n2": [COST], "n3": [COST, OWN]},
     [(Lever(Kind.MAX_EVICTIONS, "p"), ("n2",), ("n2", "n3")),
      (Lever(Kind.THRESHOLDS, "p"), ("n1",), ("n1",))]),
], ids=["empty", "pdb-before-annotation", "unliftable-beside", "never-relaxed", "ties"])
def test_levers_are_ranked_by_the_nodes_they_alone_hold(
        stays: dict[str, list[Reason]],
        expected: list[tuple[Lever, tuple[str, ...], tuple[str, ...]]]) -> None:
    found = candidates(stays, {n: ["p"] for n in stays}, _workload)
    assert [(c.lever, c.alone, c.touches) for c in found] == expected


def test_max_draining_nodes_is_a_lever_with_nothing_alone() -> None:
    (found,) = candidates({}, {}, _workload, {"p": ["n3", "n4"]})
    assert (found.lever, found.alone, found.touches) == (
        Lever(Kind.MAX_DRAINING, "p"), (), ("n3", "n4"))


@pytest.mark.parametrize(("kind", "alone", "slack", "expected"), [
    (Kind.PDB, 5, None, 5),
    (Kind.PDB, 5, 2, 2),  # no plan that keeps every Pod goes below the packing's bound
    (Kind.THRESHOLDS, 5, 0, 0),
    (Kind.SYSTEM_PODS, 5, 0, 5),  # their Pods leave for a pool of their own: no cap
])
def test_the_estimate_is_capped_by_the_packing(kind: Kind, alone: int, slack: int | None,
                                               expected: int) -> None:
    nodes = tuple(f"n{i}" for i in range(alone))
    assert estimate(Candidate(Lever(kind, "x"), nodes, nodes), slack) == expected


# --- planned again by the controller's planner ------------------------------------------


def _of(name: str, on: str, app: str, **extra: Any) -> PodInfo:
    return pod(name, on, owner=("ReplicaSet", f"{app}-1"), labels={"app": app}, **extra)


def _cluster(spec: dict[str, Any] | None = None) -> Snapshot:
    """Four nodes, a web replica on each; two db replicas under a budget allowing 0, on n1
    and n2; a cache replica annotated safe-to-evict false on n3; a kube-system Pod on n4.
    Every Pod fits on one node."""
    nodes = tuple(node(f"n{i}", labels={inputs.INSTANCE_TYPE_LABEL: "m5.large"})
                  for i in range(1, 5))
    pods = (*(_of(f"web-{i}", f"n{i}", "web") for i in range(1, 5)),
            _of("db-1", "n1", "db"), _of("db-2", "n2", "db"),
            _of("cache-1", "n3", "cache",
                annotations={names.SAFE_TO_EVICT_ANNOTATION: "false"}),
            pod("dns", "n4", ns="kube-system", owner=("ReplicaSet", "dns-1")))
    chosen = inputs.read_documents([("f#1", {
        "apiVersion": names.API_VERSION, "kind": names.POLICY_KIND,
        "metadata": {"name": "p"},
        "spec": {"scope": {"namespaceSelector": {"operator": "In", "values": ["shop"]}},
                 **(spec or {})}})])
    return inputs.with_policies(Snapshot(
        nodes=nodes, pods=pods, namespaces={"shop": {}, "kube-system": {}},
        pdbs=(PdbInfo("shop", "db", parse_selector({"matchLabels": {"app": "db"}}, "s", []),
                      0),),
        workloads=tuple(deployment(n, "shop", r) for n, r in (("web", 4), ("db", 2),
                                                              ("cache", 1))),
        owners=tuple(OwnerInfo("ReplicaSet", "shop", f"{n}-1", ("Deployment", n), {})
                     for n in ("web", "db", "cache"))), chosen)


def _relaxed(snapshot: Snapshot, prices: inputs.Prices = inputs.NO_PRICES
             ) -> tuple[preview.Report, Any]:
    planner = preview.preview_planner(snapshot, NOW)
    drains = planner(Lift())
    report = preview.build(snapshot, drains, prices)
    found = relax(snapshot, drains, report.stays, planner, prices, report.bounds.capacity,
                  report.bounds.nodes_after - report.bounds.lower_bound)
    return dataclasses.replace(report, counterfactual=found), found


def test_each_lever_planned_again_frees_what_the_plan_without_it_frees() -> None:
    snapshot = _cluster()
    report, found = _relaxed(snapshot, inputs.Prices(per_node=0.1))
    assert [f.node for f in report.freeable] == []  # n4 holds a kube-system Pod
    assert [(r.lever.kind, r.lever.target, r.estimate, r.more) for r in found] == [
        (Kind.PDB, "shop/db", 2, 1), (Kind.ANNOTATION, "Deployment shop/cache", 1, 1),
        (Kind.SYSTEM_PODS, "kube-system", 1, 1)]
    pdb, annotation, system = found
    assert pdb.monthly == pytest.approx(73.0)
    assert annotation.lever.annotation == names.SAFE_TO_EVICT_ANNOTATION
    assert system.pool_nodes == 1 and system.net == 0  # its pool takes the node it frees
    # The figures are those of the planner on the cluster changed so.
    without_pdb = preview.preview_drains(dataclasses.replace(snapshot, pdbs=()), NOW)
    assert {n for d in without_pdb for n in d.freeable} == set(pdb.nodes)
    data = json.loads(json.dumps(render.as_dict(report)))["counterfactual"]
    assert data[0] == {"kind": "PodDisruptionBudget", "target": "shop/db",
                       "change": "let it allow disruptions (it allows 0 now)", "estimate": 2,
                       "planned": True, "moreNodes": 1, "nodes": list(pdb.nodes),
                       "systemPoolNodes": 0, "monthlySavings": 73.0}
    assert data[1]["annotation"] == names.SAFE_TO_EVICT_ANNOTATION
    text = render.text(report)
    assert "  1. PodDisruptionBudget shop/db: frees 1 more node, saves $73.00/month" in text
    assert ("  3. systemPods kube-system: frees 1 more node, its own pool about 1 node"
            in text)


def _plain(spec: dict[str, Any]) -> Snapshot:
    """``_cluster`` with ``spec``, without its budget, its annotation and its kube-system
    Pod: n1, n2 and n3 run two Pods each (25 % of the CPU), n4 one."""
    snapshot = _cluster(spec)
    return dataclasses.replace(snapshot, pdbs=(), pods=tuple(
        dataclasses.replace(p, annotations={}) for p in snapshot.pods
        if p.namespace == "shop"))


@pytest.mark.parametrize(("spec", "kind", "change", "lifted"), [
    ({"highNodeUtilization": {"thresholds": {"cpu": 20, "memory": 20, "pods": 100}}},
     Kind.THRESHOLDS, "raise policy p's thresholds to cpu 25%, memory 20%, pods 100% "
     "(now 20%, 20%, 100%)",
     {"highNodeUtilization": {"thresholds": {"cpu": 25, "memory": 20, "pods": 100}}}),
    ({"maxEvictionsToFreeNode": 1}, Kind.MAX_EVICTIONS,
     "raise policy p's maxEvictionsToFreeNode to 2 (now 1)", {"maxEvictionsToFreeNode": 2}),
], ids=["thresholds", "max-evictions"])
def test_a_policy_setting_is_raised_to_what_the_kept_nodes_need(
        spec: dict[str, Any], kind: Kind, change: str, lifted: dict[str, Any]) -> None:
    snapshot = _plain({"descheduler": spec})
    report, found = _relaxed(snapshot)
    (relaxed, *_) = found
    assert (relaxed.lever, relaxed.change) == (Lever(kind, "p"), change)
    assert relaxed.more is not None and relaxed.more > 0
    # The policy applied with the setting the counterfactual names frees what it said.
    raised = _plain({"descheduler": lifted})
    freed = preview.build(raised, preview.preview_drains(raised, NOW)).freeable
    assert len(freed) == len(report.freeable) + relaxed.more


def test_levers_that_alone_hold_no_node_are_not_planned_again() -> None:
    """Every node above the thresholds as well: no lever alone holds one."""
    snapshot = _cluster({"descheduler": {
        "highNodeUtilization": {"thresholds": {"cpu": 20, "memory": 20, "pods": 100}}}})
    _, found = _relaxed(snapshot)
    assert {r.lever.kind for r in found} == {Kind.THRESHOLDS, Kind.PDB, Kind.ANNOTATION,
                                             Kind.SYSTEM_PODS}
    assert all(r.estimate == 0 and r.more is None for r in found)


def test_without_the_counterfactual_the_report_says_none() -> None:
    snapshot = _cluster()
    report = preview.build(snapshot, preview.preview_drains(snapshot, NOW))
    assert render.as_dict(report)["counterfactual"] is None
    assert "What would free more" not in render.text(report)
