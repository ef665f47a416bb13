"""What the planner's fast paths must keep: the destination lists a ``Cluster`` keeps from
one move to the next equal sorting the destinations afresh, after moves that succeed, moves
that fail and are undone, and nodes emptied; and ``inputs_key`` reads every field of the
records it digests, those added later included."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction import names
from compaction.selector import LabelSelector, Operator, requirement
from compaction.workload import WorkloadType
from controller.drain_planner.drain_plan import Member
from controller.drain_planner.memo import inputs_key
from controller.drain_planner.sim_node import SimNode, holds, rank
from controller.drain_planner.simulated_cluster import Cluster
from controller.snapshot.constraints import AntiAffinity, Constraints, Taint, Toleration
from controller.snapshot.node import NodeInfo
from controller.snapshot.pod import PodInfo
from tests.unit.controller.drain_planner.test_planner import POLICY, node, pod

POOLS = (LabelSelector(), LabelSelector((requirement("pool", Operator.IN, "a"),)),
         LabelSelector((requirement("zone", Operator.IN, "z1"),)))
PLACEMENTS = (
    Constraints(),
    Constraints(tolerations=(Toleration("dedicated", "Exists", "", "NoSchedule"),)),
    Constraints(node_selector={"pool": "a"}),
    Constraints(anti_affinity=(AntiAffinity(
        LabelSelector((requirement("app", Operator.IN, "db"),)), ()),)))


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[NodeInfo], list[PodInfo]]:
    """Nodes of several shapes, pools and taints, and Pods of several sizes and placements
    that fill some of them to the brim: moves fail part way as often as they succeed."""
    nodes = [node(f"n{i}", cpu=draw(st.sampled_from([2, 4, 8])), gi=16,
                  taints=[Taint("dedicated", "x", "NoSchedule")] if draw(st.booleans())
                  and i % 4 == 3 else [],
                  labels={"pool": draw(st.sampled_from("ab")),
                          "zone": draw(st.sampled_from(["z1", "z2"]))})
             for i in range(draw(st.integers(2, 10)))]
    pods = []
    for i in range(draw(st.integers(0, 6 * len(nodes)))):
        where = draw(st.sampled_from(nodes)).name
        pods.append(pod(f"p{i}", where, draw(st.sampled_from([0, 0.25, 0.5, 1, 1.5, 3])),
                        draw(st.sampled_from([0.25, 1, 4])),
                        labels={"app": draw(st.sampled_from(["web", "db"]))},
                        constraints=draw(st.sampled_from(PLACEMENTS))))
    return nodes, pods


def _fresh(cluster: Cluster, pool: LabelSelector) -> list[SimNode]:
    """The destinations in ``pool`` sorted anew: those of ``destinations`` (whatever the
    source) with room for the least a Pod needs."""
    return sorted((n for n in cluster.in_pool(pool) if n.open and n.hosts
                   and n.info.name not in cluster.emptied and holds(n, cluster._least)),
                  key=rank)


def _assert_kept(cluster: Cluster) -> None:
    for pool in POOLS:
        kept = cluster._destinations_in(pool)
        assert [n.info.name for n in kept] == [n.info.name for n in _fresh(cluster, pool)]


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters(), order=st.randoms(use_true_random=False))
def test_kept_destination_lists_equal_sorting_afresh_after_every_move(
        cluster: tuple[list[NodeInfo], list[PodInfo]], order: Any) -> None:
    nodes, pods = cluster
    sim = Cluster(nodes, pods)
    _assert_kept(sim)
    sources = [n.name for n in nodes]
    order.shuffle(sources)
    for source in sources:
        if source in sim.received or source in sim.emptied:
            continue
        passengers = [(p, order.choice(POOLS)) for p in sim.nodes[source].pods]
        before = {n: dict(sim.nodes[n].free) for n in sim.nodes}
        if sim.move(passengers, source) is not None:  # undone: every node holds what it held before
            assert {n: dict(sim.nodes[n].free) for n in sim.nodes} == before
        _assert_kept(sim)
    if order.random() < 0.5 and sources:
        sim.empty(sources[0])
        _assert_kept(sim)


def test_a_move_that_fails_part_way_puts_its_destinations_back_in_order() -> None:
    """The larger Pod fills the sparse node past the others; the smaller one then fits
    nowhere: the move is undone, and the sparse node goes back to where it was."""
    nodes = [node("dense"), node("sparse"), node("source", cpu=8)]
    pods = [pod("d", "dense", 2), pod("s", "sparse", 0.5), pod("a", "source", 3),
            pod("b", "source", 2.5)]
    sim = Cluster(nodes, pods)
    everywhere = LabelSelector()
    kept = sim._destinations_in(everywhere)
    assert [n.info.name for n in kept] == ["source", "dense", "sparse"]
    failure = sim.move([(p, everywhere) for p in pods[2:]], "source")
    assert failure is not None and "pod shop/b does not fit elsewhere" in failure.text
    assert [n.info.name for n in kept] == ["source", "dense", "sparse"]
    assert sim.move([(pods[2], everywhere)], "source") is None
    assert sim.moves == {("shop", "a"): "sparse"}
    assert [n.info.name for n in kept] == ["sparse", "dense"]  # the source is emptied
    _assert_kept(sim)


# --- inputs_key ------------------------------------------------------------------------

NODE = NodeInfo("n", {"zone": "a"}, {"cpu": 4000, "memory": 4000, "pods": 110_000})
POD = PodInfo("shop", "w", "u", {"app": "web"}, {}, ("ReplicaSet", "web-1"), node_name="n",
              phase="Running", ready=True, requests={"cpu": 100})
MEMBERS = {POD.key: Member(WorkloadType.DEPLOYMENT, "p", False)}


def _key(nodes: list[NodeInfo] | None = None, pods: list[PodInfo] | None = None,
         members: dict[tuple[str, str], Member] | None = None) -> int | None:
    return inputs_key([(POLICY, LabelSelector())], nodes or [NODE], pods or [POD],
                      MEMBERS if members is None else members, [])


def _changed(value: Any) -> Any:
    """Another value of the same kind as ``value``."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, dict):
        return {**value, "other": "1" if all(isinstance(v, str) for v in value.values()) else 1}
    if isinstance(value, tuple) and not value:
        return (Taint("k", "v", "NoSchedule"),)
    if isinstance(value, tuple):
        return None
    if isinstance(value, Constraints):
        return Constraints(node_selector={"zone": "a"})
    assert value is None  # created
    return datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def test_the_key_reads_every_field_of_a_pod_a_node_and_a_member() -> None:
    """Derived from the records' fields, so that a field added later is read too: changing
    any field but those the plan never reads changes the key."""
    base = _key()
    assert base is not None and base == _key()
    own = {"labels": "compactor.dev/policy", "annotations": "compactor.dev/intent"}
    for f in dataclasses.fields(PodInfo):
        value: Any = getattr(POD, f.name)
        if f.name in own:  # read but for what Compactor itself writes there
            written: dict[str, Any] = {f.name: {**value, own[f.name]: "x"}}
            assert _key(pods=[dataclasses.replace(POD, **written)]) == base, f.name
        if f.name == "annotations":
            value = {names.SAFE_TO_EVICT_ANNOTATION: "false"}
        elif f.name == "priority":
            value = 0
        change: dict[str, Any] = {f.name: _changed(value)}
        changed = dataclasses.replace(POD, **change)
        assert _key(pods=[changed], members={changed.key: MEMBERS[POD.key]}) != base, f.name
    for f in dataclasses.fields(NodeInfo):
        change = {f.name: _changed(getattr(NODE, f.name))}
        changed_node = dataclasses.replace(NODE, **change)
        assert (_key(nodes=[changed_node]) == base) == (f.name == "resource_version"), f.name
    member = MEMBERS[POD.key]
    for f in dataclasses.fields(Member):
        value = getattr(member, f.name)
        change = {f.name: WorkloadType.STATEFUL_SET if f.name == "kind" else _changed(value)}
        assert _key(members={POD.key: dataclasses.replace(member, **change)}) != base, f.name


SOFT = (Taint("dedicated", "batch", "PreferNoSchedule"), Taint("spot", "", "PreferNoSchedule"))
SOFT_TOLERATIONS = (
    (),
    (Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute"),),
    (Toleration("dedicated", "Equal", "batch", "PreferNoSchedule"),),
    (Toleration("spot", "Exists"),),
    (Toleration("", "Exists"),))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_place_takes_the_fewest_minded_soft_taints_then_the_first_in_rank_order(
        data: st.DataObject) -> None:
    """``place``'s shortcuts (nodes with a soft taint read only when the Pod could mind none
    of it) choose what reading every node would: the feasible node with the fewest soft
    taints the Pod does not tolerate, the first in rank order among those."""
    nodes = [node(f"n{i}", cpu=data.draw(st.sampled_from([1, 2, 4])),
                  taints=[t for t in SOFT if data.draw(st.booleans())]) for i in range(6)]
    pods = [pod(f"p{i}", data.draw(st.sampled_from([n.name for n in nodes])),
                data.draw(st.sampled_from([0.25, 0.5, 1])))
            for i in range(data.draw(st.integers(0, 12)))]
    sim = Cluster(nodes, pods)
    ordered = sorted(sim.nodes.values(), key=rank)
    skip = data.draw(st.sampled_from([None, *ordered]))
    tolerations = data.draw(st.sampled_from(SOFT_TOLERATIONS))
    mover = pod("mover", "elsewhere", data.draw(st.sampled_from([0.25, 1, 2])),
                constraints=Constraints(tolerations=tolerations))
    needs = {**mover.requests, "pods": 1000}
    feasible = [n for n in ordered if n is not skip and sim.fits(mover, needs, n)]
    minded = [sum(1 for t in n.info.taints if not any(x.tolerates(t) for x in tolerations))
              for n in feasible]
    expected = feasible[minded.index(min(minded))] if feasible else None
    assert sim.place(mover, needs, ordered, skip) is expected
