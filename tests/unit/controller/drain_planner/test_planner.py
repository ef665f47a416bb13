"""The drain planner as table tests and properties (hypothesis): nodes and Pods in, which
nodes can be freed and why the others cannot, out. The planner is pure."""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.policy import Policy, SchedulerMode
from compaction.quantity import add
from compaction.selector import LabelSelector, Operator, requirement
from compaction.validation import parse_policy
from compaction.workload import WorkloadType
from controller.components.descheduler import render_descheduler_policy
from controller.components.pod_settings import RuntimeSettings
from controller.drain_planner.drain_plan import DrainPlan, Member, evictions_per_run
from controller.drain_planner.planner import choose_drains
from controller.drain_planner.taint import drain_taint
from controller.plan.decide import drain_plans
from controller.plan.decide import plan as plan_pass
from controller.plan.settings import PlanSettings
from controller.snapshot.constraints import (
    AntiAffinity,
    Constraints,
    NodeRequirement,
    Taint,
    Toleration,
    parse_constraints,
)
from controller.snapshot.node import NodeInfo
from controller.snapshot.pdb import PdbInfo
from controller.snapshot.pod import PodInfo
from loadtest import planner as planner_bench

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
GI = 2**30 * 1000


def _policy(**descheduler: Any) -> Policy:
    return parse_policy({"metadata": {"name": "p"}, "spec": {"descheduler": {
        "highNodeUtilization": {"thresholds": {"cpu": 80, "memory": 80, "pods": 80}},
        **descheduler}}})


POLICY = _policy()
ALL = LabelSelector()


def node(name: str, cpu: float = 4, gi: float = 16, taints: Sequence[Taint] = (),
         labels: dict[str, str] | None = None, gpus: int = 0) -> NodeInfo:
    allocatable = {"cpu": int(cpu * 1000), "memory": int(gi * GI), "pods": 110_000}
    if gpus:
        allocatable["nvidia.com/gpu"] = gpus * 1000
    return NodeInfo(name, {"kubernetes.io/hostname": name, **(labels or {})}, allocatable,
                    tuple(taints))


def pod(name: str, on: str, cpu: float = 0.5, gi: float = 1, ns: str = "shop",
        owner: tuple[str, str] | None = ("ReplicaSet", "web-1"), **extra: Any) -> PodInfo:
    requests = {"cpu": int(cpu * 1000), "memory": int(gi * GI), **extra.pop("requests", {})}
    return PodInfo(ns, name, f"uid-{name}", extra.pop("labels", {"app": "web"}),
                   extra.pop("annotations", {}), owner, node_name=on, phase="Running",
                   ready=True, requests=requests, **extra)


def managed(*pods: PodInfo, kind: WorkloadType = WorkloadType.DEPLOYMENT,
            policy: str | None = "p", suppressed: bool = False
            ) -> dict[tuple[str, str], Member]:
    return {p.key: Member(kind, policy, suppressed) for p in pods}


def _plan(nodes: Sequence[NodeInfo], pods: Sequence[PodInfo],
          members: dict[tuple[str, str], Member] | None = None,
          pdbs: Sequence[PdbInfo] = (), policy: Policy = POLICY, pool: LabelSelector = ALL,
          budget: int = 1) -> DrainPlan:
    members = managed(*pods) if members is None else members
    if budget != policy.descheduler.max_draining_nodes:
        policy = replace(policy, descheduler=replace(policy.descheduler,
                                                     max_draining_nodes=budget))
    (result,) = choose_drains([(policy, pool)], nodes, pods, members, pdbs, NOW)
    return result


def _reasons(plan: DrainPlan, name: str) -> list[str]:
    return [r.text for u in plan.unremovable if u.node == name for r in u.reasons]


DENSE = [pod("d1", "dense", 1.5), pod("d2", "dense", 1)]


def test_the_sparse_node_is_drained_onto_the_dense_one() -> None:
    pods = [*DENSE, pod("s1", "sparse", 0.5)]
    plan = _plan([node("dense"), node("sparse")], pods)
    assert plan.freeable == ("sparse",) and plan.draining == ("sparse",)
    assert plan.evict == {"sparse": (("shop", "s1"),)}
    assert plan.moves == {("shop", "s1"): "dense"}
    assert plan.nodes_in_use == ("dense", "sparse")
    assert _reasons(plan, "dense") == ["takes Pods of the nodes planned to drain first"]


@pytest.mark.parametrize(("per_node", "per_ns", "total", "marked"), [
    (1, 10, 1, [("shop", "big")]),
    (2, 10, 5, [("shop", "big"), ("shop", "mid")]),
    (5, 10, 2, [("shop", "big"), ("shop", "mid")]),
    (10, 10, 10, [("shop", "big"), ("shop", "mid"), ("shop", "small")]),
    # The per-namespace limit binds too: one run evicts one Pod of "shop", whatever the
    # per-node and total limits allow.
    (10, 1, 10, [("shop", "big")]),
    (10, 2, 10, [("shop", "big"), ("shop", "mid")]),
])
def test_a_draining_node_marks_its_largest_pods_first_as_many_as_one_run_evicts(
        per_node: int, per_ns: int, total: int, marked: list[tuple[str, str]]) -> None:
    # The simulation places big, then mid, then small: evicted in another order, small could
    # take the room planned for big. Only what one descheduler run evicts is marked.
    pods = [*DENSE, pod("d3", "dense", 0.1), pod("d4", "dense", 0.1),
            pod("small", "sparse", 0.2), pod("big", "sparse", 0.7), pod("mid", "sparse", 0.4)]
    policy = _policy(maxNoOfPodsToEvictPerNode=per_node, maxNoOfPodsToEvictTotal=total,
                     maxNoOfPodsToEvictPerNamespace=per_ns)
    plan = _plan([node("dense"), node("sparse")], pods, policy=policy)
    assert plan.draining == ("sparse",)
    assert list(plan.evict["sparse"]) == marked


@pytest.mark.parametrize(("limits", "namespaces", "count"), [
    ({}, ["a", "a", "b"], 1),  # the defaults: one Pod a run
    ({"maxNoOfPodsToEvictPerNode": 3, "maxNoOfPodsToEvictTotal": 3}, ["a", "a", "b"], 2),
    ({"maxNoOfPodsToEvictPerNode": 3, "maxNoOfPodsToEvictTotal": 3,
      "maxNoOfPodsToEvictPerNamespace": 2}, ["a", "a", "a", "b"], 3),
    ({"maxNoOfPodsToEvictPerNode": 2, "maxNoOfPodsToEvictTotal": 5,
      "maxNoOfPodsToEvictPerNamespace": 5}, ["a", "b", "c"], 2),
    ({"maxNoOfPodsToEvictPerNode": 5, "maxNoOfPodsToEvictTotal": 5,
      "maxNoOfPodsToEvictPerNamespace": 1}, ["a", "b", "c", "a"], 3),
])
def test_evictions_per_run_keep_every_limit_the_descheduler_gets(
        limits: dict[str, int], namespaces: list[str], count: int) -> None:
    spec = _policy(**limits).descheduler
    pods = [pod(f"p{i}", "n", ns=ns) for i, ns in enumerate(namespaces)]
    chosen = evictions_per_run(pods, spec)
    assert len(chosen) == count
    per_ns = Counter(p.namespace for p in chosen)
    assert max(per_ns.values()) <= spec.max_pods_to_evict_per_namespace
    assert count <= min(spec.max_pods_to_evict_per_node, spec.max_pods_to_evict_total)
    # The same numbers are what the descheduler is given.
    doc = render_descheduler_policy(_policy(**limits), {})
    assert (doc["maxNoOfPodsToEvictPerNode"], doc["maxNoOfPodsToEvictPerNamespace"],
            doc["maxNoOfPodsToEvictTotal"]) == (spec.max_pods_to_evict_per_node,
                                                spec.max_pods_to_evict_per_namespace,
                                                spec.max_pods_to_evict_total)


def test_a_pod_that_fits_nowhere_else_keeps_its_node_and_says_how_much_is_missing() -> None:
    pods = [pod("d1", "dense", 3.5), pod("s1", "sparse", 0.6)]
    plan = _plan([node("dense"), node("sparse")], pods)
    assert plan.freeable == () or plan.freeable == ("dense",)
    assert "pod shop/s1 does not fit elsewhere: cpu 600m" in _reasons(plan, "sparse")


BLOCKERS: list[tuple[str, PodInfo, dict[tuple[str, str], Member], str]] = [
    ("safe-to-evict", pod("b", "sparse", annotations={
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}), {},
     "pod shop/b safe-to-evict=false"),
    ("on-completion", pod("b", "sparse", annotations={
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "on-completion"}), {},
     "pod shop/b safe-to-evict=on-completion"),
    ("local-storage", pod("b", "sparse", local_storage=True), {}, "pod shop/b uses local storage"),
    ("pvc", pod("b", "sparse", pvc=True), {}, "pod shop/b has a PersistentVolumeClaim"),
    ("bare", pod("b", "sparse", owner=None), {},
     "pod shop/b has no controller (a bare Pod is never recreated)"),
    ("kube-system", pod("b", "sparse", ns="kube-system"), {},
     "pod kube-system/b is in kube-system"),
    ("out-of-scope", pod("b", "sparse"), {("shop", "b"): Member(WorkloadType.DEPLOYMENT, None,
                                                               False)},
     "pod shop/b belongs to no compaction policy (Compactor never evicts it)"),
    ("inactive-policy", pod("b", "sparse"), {("shop", "b"): Member(WorkloadType.DEPLOYMENT, "q",
                                                               False)},
     "pod shop/b belongs to no compaction policy (Compactor never evicts it)"),
    ("job", pod("b", "sparse"), {("shop", "b"): Member(WorkloadType.JOB, "p", False)},
     "pod shop/b belongs to a Job (its Pods are not evicted)"),
    ("suppressed", pod("b", "sparse"), {("shop", "b"): Member(WorkloadType.DEPLOYMENT, "p",
                                                             True)},
     "pod shop/b belongs to a suppressed workload"),
    ("critical", pod("b", "sparse", priority_class_name="system-cluster-critical"), {},
     "pod shop/b is system-critical"),
    # RemovePodsViolatingNodeTaints never evicts a Pod that tolerates the drain taint.
    ("tolerates-everything", pod("b", "sparse", constraints=Constraints(
        tolerations=(Toleration(operator="Exists"),))), {},
     "pod shop/b tolerates the drain taint"),
    ("tolerates-drain", pod("b", "sparse", constraints=Constraints(
        tolerations=(Toleration("compactor.dev/drain", "Exists"),))), {},
     "pod shop/b tolerates the drain taint"),
    ("zone-anti-affinity", pod("b", "sparse", constraints=Constraints(
        unsimulated="required pod anti-affinity on topology.kubernetes.io/zone")), {},
     "pod shop/b: required pod anti-affinity on topology.kubernetes.io/zone is not simulated"),
]


@pytest.mark.parametrize(("blocker", "members", "reason"), [b[1:] for b in BLOCKERS],
                         ids=[b[0] for b in BLOCKERS])
def test_a_pod_that_cannot_move_blocks_its_node(blocker: PodInfo,
                                                members: dict[tuple[str, str], Member],
                                                reason: str) -> None:
    movable = pod("s1", "sparse")
    pods = [*DENSE, movable, blocker]
    plan = _plan([node("dense"), node("sparse")], pods, {**managed(*DENSE, movable, blocker),
                                                        **members})
    assert "sparse" not in plan.freeable and "sparse" not in plan.draining
    assert reason in _reasons(plan, "sparse")


def test_a_pdb_allowing_no_disruption_blocks_and_one_allowing_some_does_not() -> None:
    pods = [*DENSE, pod("s1", "sparse", labels={"app": "payments"})]
    sel = LabelSelector((requirement("app", Operator.IN, "payments"),))
    tight = _plan([node("dense"), node("sparse")], pods, pdbs=[PdbInfo("shop", "pay", sel, 0)])
    assert "PodDisruptionBudget shop/pay allows 0 disruptions" in _reasons(tight, "sparse")
    loose = _plan([node("dense"), node("sparse")], pods, pdbs=[PdbInfo("shop", "pay", sel, 1)])
    assert loose.freeable == ("sparse",)
    other_ns = _plan([node("dense"), node("sparse")], pods,
                     pdbs=[PdbInfo("bank", "pay", sel, 0)])
    assert other_ns.freeable == ("sparse",)


def test_a_terminating_pod_keeps_its_room_and_a_statefulset_ones_replacement_is_spoken_for(
        ) -> None:
    """kube-scheduler counts a Terminating Pod's requests until it is gone, and a StatefulSet
    recreates its Pod under the same name only then: neither room may take a planned move."""
    pods = [pod("d1", "dense", 1), pod("d2", "dense", 1), pod("s1", "sparse", 0.5)]
    nodes = [node("dense"), node("sparse")]
    assert _plan(nodes, pods).freeable == ("sparse",)
    leaving = pod("old", "dense", 1.75, deleting=True)
    held = _plan(nodes, [*pods, leaving])
    assert "sparse" not in held.freeable and ("shop", "s1") not in held.moves
    # The StatefulSet's Pod leaves the candidate itself; its replacement takes dense's room.
    db = pod("db-0", "sparse", 1.75, owner=("StatefulSet", "db"), deleting=True)
    spoken = _plan(nodes, [*pods, db])
    assert "sparse" not in spoken.freeable and ("shop", "s1") not in spoken.moves
    assert any("does not fit elsewhere" in r for r in _reasons(spoken, "sparse"))
    # A Deployment's Terminating Pod there leaves nothing to reserve: its replacement exists.
    web = pod("web-x", "sparse", 1.75, deleting=True)
    assert _plan(nodes, [*pods, web]).freeable == ("sparse",)


UNREAD = replace(POLICY, scheduler=replace(POLICY.scheduler, use_managed_scheduler=False))


@pytest.mark.parametrize(("nodes", "freeable", "text"), [
    pytest.param([node("dense"), node("other"), node("sparse")], (),
                 "pod shop/s1 is placed by a scheduler the plan cannot read, and 2 nodes "
                 "admit it", id="two-choices"),
    pytest.param([node("dense"), node("other", cpu=1.2), node("sparse")], ("sparse",), "",
                 id="one-choice"),
    pytest.param([node("dense", cpu=2.6), node("spare"), node("sparse")], (),
                 "pod shop/s1 is placed by a scheduler the plan cannot read, and the one node "
                 "that admits it is no destination", id="the-one-choice-is-empty"),
])
def test_pods_another_scheduler_places_move_only_where_it_has_no_choice(
        nodes: list[NodeInfo], freeable: tuple[str, ...], text: str) -> None:
    """The default or an external scheduler's configuration cannot be read from the API: its
    choice is known only when one node admits the Pod, and that node must be in use."""
    pods = [*DENSE, pod("o1", "other", 1), pod("s1", "sparse", 0.5)]
    assert UNREAD.scheduler.mode is SchedulerMode.DESCHEDULER_ONLY
    plan = _plan(nodes, pods, policy=UNREAD)
    assert tuple(n for n in plan.freeable if n == "sparse") == freeable
    if text:
        assert text in _reasons(plan, "sparse")
    # The compaction scheduler's choice is the simulation's: where a node in use takes the
    # Pod, the same cluster drains.
    if text != "" and "no destination" in text:
        return
    assert "sparse" in _plan(nodes, pods).freeable


BATCH = Taint("dedicated", "batch", "PreferNoSchedule")


def test_a_node_the_plan_counts_as_free_never_attracts_a_pod_it_moves() -> None:
    """z has room but a soft taint the Pod does not tolerate; p holds only a placeholder. The
    compaction scheduler's TaintToleration outweighs MostAllocated, so it sends the Pod to p:
    one eviction spent and nothing freed. The plan keeps x instead."""
    nodes = [node("x"), node("z", taints=[BATCH]), node("p")]
    pods = [pod("a", "x", 1), pod("z1", "z", 3),
            pod("hold", "p", 2, priority=-10, owner=("ReplicaSet", "placeholder"))]
    plan = _plan(nodes, pods)
    assert "x" not in plan.freeable and ("shop", "a") not in plan.moves
    assert "pod shop/a would go to node p, which the plan counts as free, not to z: the " \
        "compaction scheduler ranks it at least as high" in _reasons(plan, "x")
    # Tolerating the taint, the Pod goes where the plan sends it.
    tolerant = replace(pods[0], constraints=Constraints(tolerations=(
        Toleration("dedicated", "Equal", "batch", "PreferNoSchedule"),)))
    assert _plan(nodes, [tolerant, *pods[1:]]).moves == {("shop", "a"): "z"}


PLACEHOLDER = ("ReplicaSet", "placeholder")


def test_a_node_only_placeholders_hold_is_free_only_where_they_may_go_elsewhere() -> None:
    """p holds only a placeholder. Where it may go elsewhere, p counts as free, and x's Pod,
    which the scheduler would put on p rather than behind z's untolerated soft taint, stays
    (one node is freed all the same). Where no other node admits it, p stays in use: a
    destination like any other, which the scheduler prefers to z, and so does the plan,
    which frees x."""
    nodes = [node("x"), node("z", taints=[BATCH]), node("p")]
    pods = [pod("a", "x", 1), pod("z1", "z", 3),
            pod("hold", "p", 0.5, priority=-10, owner=PLACEHOLDER)]
    plan = _plan(nodes, pods)
    assert len(plan.freeable) == 1 and ("shop", "a") not in plan.moves
    pinned = replace(pods[2], constraints=Constraints(
        node_selector={"kubernetes.io/hostname": "p"}))
    plan = _plan(nodes, [*pods[:2], pinned])
    assert plan.freeable == ("x",) and plan.moves == {("shop", "a"): "p"}
    assert "p" in plan.nodes_in_use and "p" not in plan.freeable


def test_among_destinations_the_one_without_a_soft_taint_wins_as_the_scheduler_decides(
        ) -> None:
    """z is the fuller, but its soft taint costs more than MostAllocated can give."""
    nodes = [node("x"), node("z", taints=[BATCH]), node("w")]
    pods = [pod("a", "x", 0.5), pod("z1", "z", 3), pod("w1", "w", 2)]
    assert _plan(nodes, pods).moves == {("shop", "a"): "w"}


def test_a_pod_that_would_come_back_to_the_node_it_leaves_is_not_moved() -> None:
    """x will carry the drain taint, and so does nothing better than z: as many soft taints,
    and x scores higher with the Pod back on it. The eviction would be spent for nothing."""
    nodes = [node("x", 4), node("z", 8, taints=[BATCH])]
    pods = [pod("a", "x", 1), pod("b", "x", 1.5), pod("z1", "z", 3)]
    plan = _plan(nodes, [*pods])
    assert "x" not in plan.freeable, plan
    assert any("would go to node x" in r for r in _reasons(plan, "x"))


def test_a_pod_under_two_pdbs_blocks_whatever_they_allow() -> None:
    """The Eviction API refuses a Pod more than one budget covers, however many disruptions
    each allows: a drain could never finish there."""
    pods = [*DENSE, pod("s1", "sparse", labels={"app": "payments", "tier": "front"})]
    by_app = PdbInfo("shop", "pay", LabelSelector((requirement("app", Operator.IN, "payments"),)),
                     5)
    by_tier = PdbInfo("shop", "front", LabelSelector((requirement("tier", Operator.IN,
                                                                  "front"),)), 5)
    plan = _plan([node("dense"), node("sparse")], pods, pdbs=[by_app, by_tier])
    assert "sparse" not in plan.freeable and "sparse" not in plan.draining
    (reason,) = [r for u in plan.unremovable if u.node == "sparse" for r in u.reasons]
    assert reason.code == "multiple_pdbs"
    assert reason.text == ("pod shop/s1 is matched by PodDisruptionBudgets shop/pay, "
                           "shop/front: the Eviction API refuses a Pod under more than one")
    assert _plan([node("dense"), node("sparse")], pods, pdbs=[by_app]).freeable == ("sparse",)


def test_daemonset_and_mirror_pods_never_block() -> None:
    pods = [*DENSE, pod("s1", "sparse"), pod("agent", "sparse", owner=("DaemonSet", "agent")),
            pod("static", "sparse", owner=("Node", "sparse"),
                annotations={"kubernetes.io/config.mirror": "x"})]
    members = managed(*DENSE, pods[2])
    assert _plan([node("dense"), node("sparse")], pods, members).freeable == ("sparse",)


def test_placeholders_must_fit_elsewhere_but_are_never_evicted() -> None:
    holder = pod("hold", "sparse", 1, 2, ns="headroom", priority=-10,
                 owner=("ReplicaSet", "capacity-reservation-1"))
    pods = [*DENSE, pod("s1", "sparse"), holder]
    plan = _plan([node("dense"), node("sparse")], pods, managed(*DENSE, pods[2]))
    assert plan.freeable == ("sparse",) and plan.evict == {"sparse": (("shop", "s1"),)}
    assert plan.moves[("headroom", "hold")] == "dense"
    big = pod("hold", "sparse", 2, 2, ns="headroom", priority=-10, owner=("ReplicaSet", "c"))
    plan = _plan([node("dense"), node("sparse")], [*DENSE, pods[2], big],
                 managed(*DENSE, pods[2]))
    assert "pod headroom/hold does not fit elsewhere: cpu 2" in _reasons(plan, "sparse")


def test_a_node_of_placeholders_only_is_freeable_without_a_drain() -> None:
    holder = pod("hold", "spare", 1, 2, ns="headroom", priority=-10, owner=("ReplicaSet", "c"))
    plan = _plan([node("dense"), node("spare")], [*DENSE, holder], managed(*DENSE))
    assert plan.freeable == ("spare",) and plan.draining == ()


PLACEMENT_CASES = [
    ("node-selector", Constraints(node_selector={"pool": "gpu"}),
     "no other node in use admits it (pool, nodeSelector, affinity or taints)"),
    ("untolerated-taint", Constraints(), "no other node in use admits it"),
]


def test_a_pod_goes_only_where_its_node_selector_and_the_taints_allow() -> None:
    picky = pod("s1", "sparse", constraints=Constraints(node_selector={"pool": "gpu"}))
    plan = _plan([node("dense"), node("sparse", labels={"pool": "gpu"})], [*DENSE, picky])
    assert any("no other node in use admits it" in r for r in _reasons(plan, "sparse"))
    tainted = [node("dense", taints=[Taint("dedicated", "db", "NoSchedule")]), node("sparse")]
    plan = _plan(tainted, [*DENSE, pod("s1", "sparse")])
    assert any("no other node in use admits it" in r for r in _reasons(plan, "sparse"))
    tolerant = pod("s1", "sparse", constraints=Constraints(tolerations=(
        Toleration("dedicated", "Equal", "db", "NoSchedule"),)))
    assert _plan(tainted, [*DENSE, tolerant]).freeable == ("sparse",)


def test_required_anti_affinity_on_the_hostname_is_honoured_both_ways() -> None:
    sel = LabelSelector((requirement("app", Operator.IN, "web"),))
    spread = Constraints(anti_affinity=(AntiAffinity(sel, ()),))
    lonely = pod("s1", "sparse", constraints=spread)
    assert _plan([node("dense"), node("sparse")], [*DENSE, lonely]).freeable == ()
    guarded = [pod("d1", "dense", 1.5, constraints=spread), pod("s1", "sparse")]
    assert _plan([node("dense"), node("sparse")], guarded).freeable == ()
    other_app = pod("s1", "sparse", labels={"app": "api"})
    assert _plan([node("dense"), node("sparse")], [guarded[0], other_app]).freeable == (
        "sparse",)


def test_a_node_another_autoscaler_removes_is_never_a_destination() -> None:
    leaving = node("dense", taints=[Taint("ToBeDeletedByClusterAutoscaler", "", "NoSchedule")])
    plan = _plan([leaving, node("sparse")], [*DENSE, pod("s1", "sparse")])
    assert "sparse" not in plan.freeable
    assert "node is being removed by an autoscaler" in _reasons(plan, "dense")


def test_what_is_planned_onto_a_destination_counts_for_the_next_node() -> None:
    nodes = [node("dense"), node("a"), node("b")]
    pods = [pod("d1", "dense", 2), pod("a1", "a", 1.5), pod("b1", "b", 1.5)]
    plan = _plan(nodes, pods, budget=5)
    assert len(plan.freeable) == 1, plan
    (other,) = {"a", "b"} - set(plan.freeable)
    assert any("does not fit elsewhere" in r or "takes Pods" in r
               for r in _reasons(plan, other))


def test_candidates_go_fewest_pods_first_and_the_budget_bounds_the_drains() -> None:
    nodes = [node("dense"), node("two"), node("one")]
    pods = [pod("d1", "dense", 1), pod("t1", "two", 0.25), pod("t2", "two", 0.25),
            pod("o1", "one", 0.25)]
    plan = _plan(nodes, pods, budget=1)
    assert plan.freeable[0] == "one" and plan.draining == ("one",)
    assert _plan(nodes, pods, budget=2).draining == plan.freeable[:2]


def test_thresholds_and_number_of_nodes_keep_their_reference_meaning() -> None:
    pods = [pod("d1", "dense", 1), pod("s1", "sparse", 3.5)]
    plan = _plan([node("dense"), node("sparse")], pods)
    assert "above the 80% CPU threshold" in _reasons(plan, "sparse")
    gated = _policy(highNodeUtilization={"numberOfNodes": 2, "thresholds": {
        "cpu": 80, "memory": 80, "pods": 80}})
    plan = _plan([node("dense"), node("sparse")], [*DENSE, pod("s1", "sparse")], policy=gated)
    assert any("numberOfNodes is 2" in r for r in _reasons(plan, "sparse"))


def test_the_pool_bounds_candidates_and_destinations() -> None:
    pool = LabelSelector((requirement("pool", Operator.IN, "a"),))
    nodes = [node("dense"), node("sparse", labels={"pool": "a"}),
             node("other", labels={"pool": "a"})]
    pods = [*DENSE, pod("s1", "sparse"), pod("o1", "other"), pod("o2", "other")]
    plan = _plan(nodes, pods, pool=pool)
    # "dense" is outside the pool: the Pod may go to "other" only.
    assert plan.moves.get(("shop", "s1")) == "other"
    assert "dense" not in plan.nodes_in_use


@pytest.mark.parametrize("keeps", [
    pytest.param([], id="empty"),
    pytest.param([pod("agent", "spare", 0.05, owner=("DaemonSet", "agent"))],
                 id="daemonset-only"),
    pytest.param([pod("hold", "spare", 1, ns="headroom", priority=-10)],
                 id="placeholder-only"),
])
def test_a_node_running_nothing_that_keeps_it_in_use_is_no_destination(
        keeps: list[PodInfo]) -> None:
    # Draining "sparse" into "spare" would free nothing, and the next plan would drain
    # "spare" back: the Pod fits nowhere else, so "sparse" stays.
    pods = [pod("d1", "dense", 3.8), pod("s1", "sparse", 0.5), *keeps]
    plan = _plan([node("dense"), node("sparse"), node("spare")], pods)
    assert "sparse" not in plan.freeable and plan.draining == ()
    assert ("shop", "s1") not in plan.moves
    assert any("does not fit elsewhere" in r for r in _reasons(plan, "sparse"))


def _draining(name: str, since: datetime.datetime = NOW) -> NodeInfo:
    return node(name, taints=[drain_taint("p", since)])


def test_a_drain_in_progress_is_kept_finished_or_abandoned() -> None:
    pods = [*DENSE, pod("s1", "sparse")]
    kept = _plan([node("dense"), _draining("sparse")], pods)
    assert kept.draining == ("sparse",) and not kept.abandoned
    done = _plan([node("dense"), _draining("sparse")], DENSE)
    assert done.drained == ("sparse",)
    blocked = [*pods, pod("b", "sparse", annotations={
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"})]
    (gone,) = _plan([node("dense"), _draining("sparse")], blocked).abandoned
    assert gone.reasons[0].code == "safe_to_evict"
    old = _draining("sparse", NOW - datetime.timedelta(hours=7))
    (late,) = _plan([node("dense"), old], pods).abandoned
    assert late.reasons[0].code == "timed_out"
    pool = LabelSelector((requirement("pool", Operator.IN, "a"),))
    (left,) = _plan([node("dense", labels={"pool": "a"}), _draining("sparse")], pods,
                    pool=pool).abandoned
    assert left.reasons[0].code == "left_pool"
    down = replace(_draining("sparse"), ready=False)
    (lost,) = _plan([node("dense"), down], pods).abandoned
    assert lost.reasons[0].code == "not_ready" and lost.node == "sparse"


def test_a_drain_under_way_is_the_whole_plans_whoever_started_it() -> None:
    # The taint names the policy it was started for; the Pods of every policy there drain
    # under it, and the node is never a destination meanwhile.
    theirs = node("dense", taints=[drain_taint("q", NOW)])
    plan = _plan([theirs, node("sparse")], [*DENSE, pod("s1", "sparse")])
    assert plan.draining == ("dense",) and plan.evict == {"dense": (("shop", "d1"),)}
    assert "sparse" not in plan.freeable
    assert _reasons(plan, "sparse") == ["takes Pods of the nodes planned to drain first"]


def test_extended_resources_must_fit_too() -> None:
    gpu = pod("s1", "sparse", requests={"nvidia.com/gpu": 1000})
    plan = _plan([node("dense"), node("sparse", gpus=1)], [*DENSE, gpu])
    assert "pod shop/s1 does not fit elsewhere: nvidia.com/gpu 1" in _reasons(plan, "sparse")
    plan = _plan([node("dense", gpus=2), node("sparse")], [*DENSE, gpu])
    assert plan.freeable == ("sparse",)


# --- properties ------------------------------------------------------------------------

sizes = st.sampled_from([0.1, 0.25, 0.5, 0.75, 1, 1.5, 2])


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[NodeInfo], list[PodInfo]]:
    count = draw(st.integers(2, 8))
    nodes = [node(f"n{i}", cpu=4, gi=8) for i in range(count)]
    pods: list[PodInfo] = []
    used = {n.name: [0.0, 0.0] for n in nodes}
    for i in range(draw(st.integers(0, 4 * count))):
        where = draw(st.sampled_from(nodes)).name
        cpu, gi = draw(sizes), draw(sizes)
        if used[where][0] + cpu > 4 or used[where][1] + gi > 8:
            continue
        used[where][0] += cpu
        used[where][1] += gi
        pods.append(pod(f"p{i}", where, cpu, gi))
    return nodes, pods


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters(), budget=st.integers(1, 3))
def test_every_plan_places_each_pod_where_it_fits_and_frees_what_it_says(
        cluster: tuple[list[NodeInfo], list[PodInfo]], budget: int) -> None:
    nodes, pods = cluster
    plan = _plan(nodes, pods, budget=budget)
    freed = set(plan.freeable)
    assert set(plan.draining) <= freed and len(plan.draining) <= budget
    on = {p.key: p.node_name for p in pods}
    assert {k for k, n in on.items() if n in freed} == set(plan.moves)
    load: dict[str, dict[str, int]] = {n.name: {} for n in nodes}
    for p in pods:
        where = plan.moves.get(p.key, p.node_name)
        assert where not in freed
        load[where] = add(load[where], p.requests, {"pods": 1000})
    for n in nodes:
        for resource, amount in load[n.name].items():
            assert amount <= n.allocatable[resource], (n.name, resource)
    # Reported nodes are each in exactly one place.
    assert not freed & {u.node for u in plan.unremovable}


def test_the_benchmarks_thousand_node_plan_keeps_every_invariant() -> None:
    """The cluster ``make bench`` times, checked as the property above checks small ones:
    the fast paths (first fit for unconstrained Pods, full nodes dropped) change no answer a
    planner may give."""
    snapshot = planner_bench.cluster(1000)
    result = plan_pass(snapshot, PlanSettings(RuntimeSettings()), NOW)
    drain = result.drains[0]
    freed = set(drain.freeable)
    assert len(freed) > 300 and len(drain.draining) == 1
    nodes = {n.name: n for n in snapshot.nodes}
    on_freed = {p.key for p in snapshot.pods if p.node_name in freed
                and p.owner is not None and p.owner[0] != "DaemonSet"}
    assert on_freed == set(drain.moves)
    load: dict[str, dict[str, int]] = {n: {} for n in nodes}
    for p in snapshot.pods:
        if p.owner is not None and p.owner[0] == "DaemonSet" and p.node_name in freed:
            continue  # leaves with its node
        where = drain.moves.get(p.key, p.node_name)
        assert where not in freed
        load[where] = add(load[where], p.requests, {"pods": 1000})
    for name, used in load.items():
        assert all(a <= nodes[name].allocatable[r] for r, a in used.items()), name


@pytest.mark.parametrize(("nodes", "policies"), [(100, 1), (100, 20), (1000, 20)])
def test_the_benchmarks_plans_give_every_node_and_pod_a_verdict(nodes: int,
                                                                  policies: int) -> None:
    snapshot = planner_bench.cluster(nodes, policies)
    result = plan_pass(snapshot, PlanSettings(RuntimeSettings()), NOW)
    assert len(result.drains) == policies
    assert planner_bench.verdicts(snapshot, result.drains) == []
    # The pass's drains alone, as the preview plans them, are the same plans.
    assert drain_plans(snapshot, PlanSettings(RuntimeSettings()), NOW) == result.drains


def test_the_benchmarks_policies_share_every_node_each_in_namespaces_of_its_own() -> None:
    snapshot = planner_bench.cluster(1000, 20)
    scoped = [p.policy.scope.namespace_selector.values for p in snapshot.policies
              if p.policy is not None and p.policy.scope.namespace_selector is not None]
    assert len(scoped) == 20 and len({ns for values in scoped for ns in values}) == 40
    owner = {ns: i for i, values in enumerate(scoped) for ns in values}
    on: dict[str, set[int]] = {n.name: set() for n in snapshot.nodes}
    placeholders = [p for p in snapshot.pods if p.namespace == "headroom"]
    for p in snapshot.pods:
        if not p.daemon and p.namespace != "headroom":
            on[p.node_name].add(owner[p.namespace])
    assert min(map(len, on.values())) >= 10
    # The mix, a pinned Pod per ten nodes, a placeholder per ten, a Terminating Pod per 25.
    assert sum(not p.daemon for p in snapshot.pods) == 29_100 + 100 + 40
    assert len(placeholders) == 100 and all(p.priority == -10 for p in placeholders)
    assert sum(p.deleting for p in snapshot.pods) == 40
    assert sum(bool(n.taints) for n in snapshot.nodes) == 111


def test_the_benchmarks_check_finds_pods_left_behind_and_pods_of_no_policy() -> None:
    snapshot = planner_bench.cluster(100, 20)
    drains = plan_pass(snapshot, PlanSettings(RuntimeSettings()), NOW).drains
    unplaced = [replace(drains[0], moves={}), *drains[1:]]
    assert any("unplaced" in p for p in planner_bench.verdicts(snapshot, unplaced))
    orphaned = replace(snapshot, policies=snapshot.policies[1:])
    drains = plan_pass(orphaned, PlanSettings(RuntimeSettings()), NOW).drains
    assert "unexpected reasons: no_policy" in planner_bench.verdicts(orphaned, drains)


def _pending(name: str, cpu: float) -> PodInfo:
    return replace(pod(name, "", cpu), phase="Pending", ready=False)


def test_a_pending_pod_takes_its_room_before_any_drain_is_planned() -> None:
    """An evicted Pod's replacement not yet scheduled: the room it will take on the dense
    node is not there for the sparse node's Pod, so the sparse node is not drained into it."""
    pods = [pod("d1", "dense", 3), pod("s1", "sparse", 0.8)]
    assert _plan([node("dense"), node("sparse")], pods).freeable == ("sparse",)
    waiting = _plan([node("dense"), node("sparse")], [*pods, _pending("r1", 0.5)])
    assert waiting.freeable == ()
    assert "pod shop/s1 does not fit elsewhere: cpu 800m" in _reasons(waiting, "sparse")
    # The node it will land on is no candidate meanwhile, and nobody evicts the Pending Pod.
    assert _reasons(waiting, "dense") == ["takes Pods of the nodes planned to drain first"]
    assert all(("shop", "r1") not in keys for keys in waiting.evict.values())


def test_a_pending_pod_that_fits_nowhere_changes_nothing() -> None:
    pods = [pod("d1", "dense", 3), pod("s1", "sparse", 0.8), _pending("huge", 9)]
    assert _plan([node("dense"), node("sparse")], pods).freeable == ("sparse",)


def test_a_plan_is_reused_while_nothing_it_reads_changes_but_compactors_own_labels() -> None:
    from controller.drain_planner.memo import REUSE, reuse_or_choose
    nodes = [node("a"), node("b"), node("c")]
    pods = [pod("w1", "a"), pod("w2", "b"), pod("w3", "c", cpu=2)]
    members = managed(*pods)
    policies = [(POLICY, ALL)]
    first, memo = reuse_or_choose(None, policies, nodes, pods, members, [], NOW)
    assert memo is not None
    labelled = [replace(p, labels={**p.labels, "compactor.dev/policy": "p"},
                        annotations={"compactor.dev/intent": "{}"}) for p in pods]
    again, same = reuse_or_choose(memo, policies, nodes, labelled, managed(*labelled), [],
                                  NOW + datetime.timedelta(seconds=5))
    assert same is memo and again == first
    moved = [replace(pods[0], node_name="c"), *pods[1:]]
    _, fresh = reuse_or_choose(memo, policies, nodes, moved, managed(*moved), [], NOW)
    assert fresh is not None and fresh is not memo
    _, late = reuse_or_choose(memo, policies, nodes, pods, members, [], NOW + REUSE)
    assert late is not memo and late is not None and late.at == NOW + REUSE
    own = PdbInfo("shop", "b", LabelSelector((requirement(
        "compactor.dev/policy", Operator.IN, "p"),)), 1)
    _, none = reuse_or_choose(memo, policies, nodes, pods, members, [own], NOW)
    assert none is None, "a budget that selects on Compactor's labels: always planned afresh"


def test_a_pod_with_only_tolerations_is_placed_as_one_without_constraints() -> None:
    tolerates = Constraints(tolerations=(Toleration("dedicated", "Exists", "", "NoSchedule"),))
    assert tolerates.tolerations_only and not Constraints(node_selector={"a": "b"}).tolerations_only
    tainted = node("t", taints=[Taint("dedicated", "gpu", "NoSchedule")])
    nodes = [node("a"), node("b", cpu=2), tainted]
    mover = pod("m", "a", cpu=0.5, constraints=tolerates)
    plain = pod("p", "a", cpu=0.5)
    others = [pod("x", "b", cpu=1.5), pod("y", "t", cpu=3.2, constraints=tolerates)]
    plans = choose_drains([(POLICY, ALL)], nodes, [mover, plain, *others],
                          managed(mover, plain), [], NOW)
    # Both leave a: the tolerating Pod first, for the most allocated node (tainted, which it
    # tolerates), the other for b, where one of them fits.
    assert plans[0].freeable == ("a",)
    assert plans[0].moves == {("shop", "m"): "t", ("shop", "p"): "b"}


def _affine(*terms: tuple[NodeRequirement, ...]) -> PodInfo:
    return pod("s1", "sparse", constraints=Constraints(terms=terms))


@pytest.mark.parametrize(("terms", "freeable"), [
    pytest.param(((NodeRequirement("zone", "In", ("a",)),),), ("sparse",), id="in-matches"),
    pytest.param(((NodeRequirement("zone", "In", ("b",)),),), (), id="in-matches-no-other"),
    pytest.param(((NodeRequirement("zone", "NotIn", ("a",)),),), (), id="not-in"),
    pytest.param(((NodeRequirement("gpu", "Exists"),),), (), id="exists-absent"),
    pytest.param(((NodeRequirement("gpu", "DoesNotExist"),),), ("sparse",), id="does-not-exist"),
    pytest.param(((NodeRequirement("cores", "Gt", ("8",)),),), ("sparse",), id="gt"),
    pytest.param(((NodeRequirement("cores", "Lt", ("8",)),),), (), id="lt"),
    pytest.param(((NodeRequirement("metadata.name", "In", ("dense",), field=True),),),
                 ("sparse",), id="match-fields-name"),
    pytest.param(((NodeRequirement("metadata.name", "In", ("sparse",), field=True),),), (),
                 id="match-fields-own-node-only"),
    # Terms are ORed, the requirements of one term ANDed.
    pytest.param(((NodeRequirement("zone", "In", ("b",)),),
                  (NodeRequirement("zone", "In", ("a",)),)), ("sparse",), id="second-term"),
    pytest.param(((NodeRequirement("zone", "In", ("a",)),
                   NodeRequirement("gpu", "Exists")),), (), id="and-within-term"),
])
def test_required_node_affinity_decides_where_a_pod_may_go(
        terms: tuple[tuple[NodeRequirement, ...], ...], freeable: tuple[str, ...]) -> None:
    nodes = [node("dense", labels={"zone": "a", "cores": "16"}),
             node("sparse", labels={"zone": "b", "cores": "4"})]
    plan = _plan(nodes, [*DENSE, _affine(*terms)])
    assert ("sparse" in plan.freeable) == bool(freeable)
    if not freeable:
        assert any("no other node in use admits it" in r for r in _reasons(plan, "sparse"))


def test_required_node_affinity_is_read_from_the_pod_spec() -> None:
    constraints = parse_constraints({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In",
                              "values": ["spare"]}]}]}}}})
    assert constraints.admits("x", {"zone": "a"}) and constraints.admits("spare", {})
    assert not constraints.admits("x", {"zone": "b"})
    assert not constraints.tolerations_only


@pytest.mark.parametrize("taint", ["ToBeDeletedByClusterAutoscaler",
                                   "DeletionCandidateOfClusterAutoscaler"])
def test_a_node_the_cluster_autoscaler_removes_is_neither_destination_nor_candidate(
        taint: str) -> None:
    effect = "NoSchedule" if taint.startswith("ToBe") else "PreferNoSchedule"
    leaving = node("dense", taints=[Taint(taint, "1733000000", effect)])
    plan = _plan([leaving, node("sparse")], [*DENSE, pod("s1", "sparse")])
    assert plan.freeable == () and plan.moves == {}
    assert "node is being removed by an autoscaler" in _reasons(plan, "dense")
    # With a second destination the sparse node drains there, never onto the leaving one.
    plan = _plan([leaving, node("sparse"), node("other")],
                 [*DENSE, pod("s1", "sparse"), pod("o1", "other", 2)])
    assert plan.freeable == ("sparse",) and plan.moves == {("shop", "s1"): "other"}


def test_between_nodes_of_as_many_pods_the_least_requested_is_tried_first() -> None:
    nodes = [node("dense"), node("heavier"), node("lighter")]
    pods = [pod("d1", "dense", 2), pod("h1", "heavier", 0.75), pod("l1", "lighter", 0.25)]
    plan = _plan(nodes, pods, budget=1)
    assert plan.freeable[0] == "lighter" and plan.draining == ("lighter",)


def test_the_pod_count_a_node_allows_binds_like_cpu_and_memory() -> None:
    def small(name: str, on: str) -> PodInfo:
        return pod(name, on, 0.01, 0.01)
    def three_pods(name: str) -> NodeInfo:
        return NodeInfo(name, {"kubernetes.io/hostname": name},
                        {"cpu": 4000, "memory": 16 * GI, "pods": 3000}, ())
    pods = [small("d1", "dense"), small("d2", "dense"), small("s1", "sparse"),
            small("s2", "sparse")]
    plan = _plan([three_pods("dense"), three_pods("sparse")], pods)
    assert plan.freeable == ()
    assert any("room for 1 more Pod" in r for r in _reasons(plan, "sparse"))
    roomy = replace(three_pods("dense"), allocatable={**three_pods("dense").allocatable,
                                                       "pods": 4000})
    assert _plan([roomy, three_pods("sparse")], pods).freeable == ("sparse",)


def test_a_pod_that_no_single_node_has_room_for_says_so() -> None:
    # "a" has the memory but not the CPU, "b" the CPU but not the memory.
    pods = [pod("a1", "a", 3.5, 1), pod("b1", "b", 1, 15), pod("s1", "sparse", 1, 2)]
    plan = _plan([node("a"), node("b"), node("sparse")], pods)
    assert "sparse" not in plan.freeable
    assert ("pod shop/s1 does not fit elsewhere: no node has room for all it requests at once"
            in _reasons(plan, "sparse"))
