"""The race's figures from a recorded timeline (built by hand here: the boundary this tests
is the timeline, which a run records from the real cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from localcluster.bench.race.metrics import RunMetrics, broken_budgets, compute, integrate, time_to
from localcluster.bench.race.timeline import (
    Eviction,
    NodeSample,
    PdbSample,
    PodSample,
    Sample,
    actor_of,
    parse_evictions,
)


def pod(uid: str, workload: str, node: str, ns: str = "production", ready: bool = True,
        ds: bool = False) -> PodSample:
    return PodSample(uid, ns, f"{workload}-{uid}", workload, node, ready and bool(node), ds,
                     0.0, None)


def nodes(*names: str) -> tuple[NodeSample, ...]:
    return tuple(NodeSample(n, "big" if n == "n0" else "small") for n in names)


PRICES = {"big": 2.0, "small": 1.0}
# Three nodes; web's pod on n2 is evicted by Karpenter at 100 s, its replacement Pending for
# one sample, then bound on n1; n2 goes at 200 s; the pinned Pod never moves; the DaemonSet's
# Pod on n2 is evicted too (not counted).
T0 = Sample(0, nodes("n0", "n1", "n2"), 3, (
    pod("a", "web", "n0"), pod("b", "web", "n2"), pod("p", "pinned", "n1"),
    pod("d2", "node-agent", "n2", ds=True)), (PdbSample("production/web", 2, 1),))
T1 = Sample(100, nodes("n0", "n1", "n2"), 3, (
    pod("a", "web", "n0"), pod("c", "web", ""), pod("p", "pinned", "n1")),
    (PdbSample("production/web", 1, 1),))
T2 = Sample(200, nodes("n0", "n1"), 2, (
    pod("a", "web", "n0"), pod("c", "web", "n1"), pod("p", "pinned", "n1")),
    (PdbSample("production/web", 2, 1),))
EVICTIONS = [Eviction(100, "production", "web-b", "karpenter"),
             Eviction(101, "production", "node-agent-d2", "karpenter")]


def run(**kw: Any) -> RunMetrics:
    args: dict[str, Any] = {
        "samples": [T0, T1, T2], "evictions": EVICTIONS, "horizon": 400.0, "prices": PRICES,
        "desired": {"production/web": 2, "production/pinned": 1},
        "protected": {"production/pinned"}, **kw}
    return compute(**args)


def test_node_hours_and_dollars_hold_each_sample_until_the_next() -> None:
    hours, dollars = integrate([T0, T1, T2], 400.0, PRICES)
    # 3 nodes for 200 s, 2 for 200 s.
    assert hours == pytest.approx((3 * 200 + 2 * 200) / 3600)
    assert dollars == pytest.approx((4 * 200 + 3 * 200) / 3600)


def test_time_to_a_share_of_the_final_reduction() -> None:
    assert time_to([T0, T1, T2], 0.5) == 200
    assert time_to([T0, T1], 0.5) is None  # no reduction


def test_the_figures_of_a_hand_made_run() -> None:
    m = run()
    assert (m.nodes_start, m.nodes_end, m.claims_end) == (3, 2, 2)
    assert (m.in_use_before, m.in_use_after, m.net_removed) == (3, 2, 1)
    assert m.evictions == {"karpenter": 1}  # DaemonSet left out
    assert m.evicted_again == 0
    assert m.protected_moved == 0
    assert m.max_unavailable == {"production/web": 1, "production/pinned": 0}
    assert m.restarted_share["production/web"] == 0.5
    assert m.pdb_violations == 0
    assert m.pending_max == 100  # one sample unbound
    assert m.launched == 0 and not m.cut


def test_a_replacement_evicted_again_and_a_protected_pod_moved_are_counted() -> None:
    m = run(evictions=[*EVICTIONS, Eviction(300, "production", "web-c", "descheduler"),
                       Eviction(300, "production", "pinned-p", "karpenter")])
    assert m.evicted_again == 1 and m.protected_moved == 1
    assert m.evictions == {"karpenter": 2, "descheduler": 1}


def test_a_pdb_whose_healthy_count_falls_below_its_desired_count_is_a_violation() -> None:
    bad = Sample(250, T2.nodes, 2, T2.pods, (PdbSample("production/web", 0, 1),))
    assert run(samples=[T0, T1, T2, bad]).pdb_violations == 1


@pytest.mark.parametrize(("healthy", "desired", "broken"), [
    # (current, desired) per sample of one PDB
    ([2, 2, 2], [1, 3, 3], False),  # a scale-up: its new replicas wait for a node
    ([2, 3, 2], [1, 3, 3], True),  # then one of them lost
    ([2, 2, 1], [1, 3, 3], True),  # lost while the scale-up still waits
    ([2, 1, 1], [1, 1, 1], False),  # down to its budget, not below
    ([1, 0], [1, 1], True),
    ([0, 0], [1, 1], False),  # below from the first sample: the start, not the run
    ([1, 1, 0], [1, 2, 2], True),  # a fall while a scale-up waits
])
def test_only_a_fall_below_the_desired_count_breaks_a_budget(
        healthy: list[int], desired: list[int], broken: bool) -> None:
    samples = [Sample(t * 10, T0.nodes, 3, T0.pods, (PdbSample("production/web", h, d),))
               for t, (h, d) in enumerate(zip(healthy, desired, strict=True))]
    assert broken_budgets(samples) == ({"production/web"} if broken else set())


def test_a_run_still_changing_at_the_horizon_is_flagged_cut() -> None:
    assert run(quiet=250.0).cut  # n2 left 200 s before the end
    assert run(timeouts=1).flagged


def test_a_launched_node_is_counted() -> None:
    extra = Sample(300, nodes("n0", "n1", "n3"), 3, T2.pods, T2.pdbs)
    assert run(samples=[T0, T1, T2, extra]).launched == 1


def test_evictions_in_the_audit_log_with_their_actor() -> None:
    line = (b'{"verb":"create","stage":"ResponseComplete","objectRef":{"namespace":"batch",'
            b'"name":"w-1","subresource":"eviction"},"responseStatus":{"code":201},'
            b'"requestReceivedTimestamp":"2026-12-06T10:00:05.000000Z","user":{"username":'
            b'"admin"},"userAgent":"karpenter-kwok/v0.0.0 (linux/amd64) kubernetes/$Format"}')
    refused = line.replace(b'"code":201', b'"code":429')
    (e,) = parse_evictions([line, refused], started=1796551200.0)
    assert (e.namespace, e.pod, e.actor, e.t) == ("batch", "w-1", "karpenter", 5.0)


@pytest.mark.parametrize(("user", "agent", "actor"), [
    ("system:serviceaccount:compactor-system:compactor-controller", "python", "runtime-hook"),
    ("system:serviceaccount:compactor-system:compactor-descheduler", "x", "descheduler"),
    ("admin", "descheduler/v0.36.0 (linux/amd64)", "descheduler"),
    ("admin", "karpenter-kwok/v0.0.0", "karpenter"),
    ("admin", "kubectl/v1.36", "other"),
])
def test_actors(user: str, agent: str, actor: str) -> None:
    assert actor_of(user, agent) == actor


def test_pods_created_during_the_run_are_counted_by_their_scheduler() -> None:
    moved = PodSample("c", "production", "web-c", "web", "n1", True, False, 0.0, None,
                      "compactor-scheduler")
    later = Sample(300, T2.nodes, 2, (*T2.pods[:1], moved, *T2.pods[2:]), T2.pdbs)
    assert run(samples=[T0, T1, later]).new_pods_by_scheduler == {"compactor-scheduler": 1}


def test_a_pod_on_a_node_outside_the_pool_makes_no_node_in_use() -> None:
    # Compactor's scheduler Pod on the system node, which the samples' pool nodes leave out.
    system = pod("s", "compactor-scheduler", "system-0", ns="compactor-system")
    samples = [Sample(t.t, t.nodes, t.claims, (*t.pods, system), t.pdbs) for t in (T0, T1, T2)]
    m = run(samples=samples)
    assert (m.in_use_before, m.in_use_after) == (3, 2)
