"""The figures of one run, computed from its recorded timeline alone (pure).

Node-hours and dollars integrate the NodePool's nodes over the fixed horizon (each sample's
count holds until the next). "In use" is a node holding a Pod other than a DaemonSet's
(placeholders count: Karpenter will not remove such a node). Evictions leave out DaemonSet
Pods, which Karpenter's terminator evicts from every node it removes. A Pod evicted "again"
is one created during the run (a replacement) and then evicted itself.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from localcluster.bench.race.timeline import Eviction, Sample


@dataclass(frozen=True)
class RunMetrics:
    horizon: float
    node_hours: float
    dollars: float
    nodes_start: int
    nodes_end: int
    claims_end: int
    in_use_before: int
    in_use_after: int
    t50: float | None  # seconds to 50 % of the final reduction of nodes; None: no reduction
    t90: float | None
    evictions: dict[str, int]  # by actor, DaemonSet Pods left out
    evicted_again: int
    protected_moved: int
    max_unavailable: dict[str, int]  # per workload, the most replicas not ready at once
    restarted_share: dict[str, float]  # per workload, the share of its start's Pods gone
    pdb_violations: int  # PDBs whose healthy count fell below their desired healthy count
    pending_max: float  # seconds, the longest a Pod created during the run went unbound
    pending_total: float
    launched: int
    launched_by_cause: dict[str, int] = field(default_factory=dict)
    karpenter_timeouts: int = 0
    karpenter_failed_validations: int = 0
    cut: bool = False  # the horizon ended a run that was still changing
    # Pods created during the run, by the scheduler that placed them.
    new_pods_by_scheduler: dict[str, int] = field(default_factory=dict)

    @property
    def net_removed(self) -> int:
        return self.in_use_before - self.in_use_after

    @property
    def total_evictions(self) -> int:
        return sum(self.evictions.values())

    @property
    def flagged(self) -> bool:
        return self.cut or self.karpenter_timeouts > 0 or self.karpenter_failed_validations > 0


def integrate(samples: Sequence[Sample], horizon: float,
              prices: Mapping[str, float]) -> tuple[float, float]:
    """Node-hours and dollars from 0 to ``horizon``: each sample's nodes until the next."""
    hours = dollars = 0.0
    for s, nxt in zip(samples, [*samples[1:], None], strict=True):
        end = min(horizon, nxt.t if nxt else horizon)
        span = max(0.0, end - max(0.0, s.t)) / 3600
        hours += len(s.nodes) * span
        dollars += sum(prices.get(n.instance_type, 0.0) for n in s.nodes) * span
    return hours, dollars


def in_use(s: Sample) -> set[str]:
    """The pool's nodes holding a Pod other than a DaemonSet's (not the system node's)."""
    pool = {n.name for n in s.nodes}
    return {p.node for p in s.pods if p.node in pool and not p.daemonset}


def time_to(samples: Sequence[Sample], share: float) -> float | None:
    """Seconds until the nodes first fell by ``share`` of their final reduction."""
    first, last = len(samples[0].nodes), len(samples[-1].nodes)
    if last >= first:
        return None
    for s in samples:
        if first - len(s.nodes) >= share * (first - last):
            return s.t
    return None


def _changed_late(samples: Sequence[Sample], quiet: float) -> bool:
    """Nodes or Pods changed in the last ``quiet`` seconds, a Pod is unbound or a node is
    being disrupted at the end: the horizon cut the run short."""
    end = samples[-1]
    if any(not p.node for p in end.pods) or any(n.disrupting for n in end.nodes):
        return True
    key = ({n.name for n in end.nodes}, {p.uid for p in end.pods})
    return any(({n.name for n in s.nodes}, {p.uid for p in s.pods}) != key
               for s in samples if s.t >= end.t - quiet)


def broken_budgets(samples: Sequence[Sample]) -> set[str]:
    """The PDBs whose healthy count fell, from one sample to the next, to below their desired
    healthy count: what the run did, not the state it started from. A PDB is also below it
    while a scale-up's new replicas wait for nodes (its desired count rises with the
    replicas), which takes no Pod from anyone."""
    last: dict[str, int] = {}
    out = set()
    for s in samples:
        for b in s.pdbs:
            before = last.get(b.key)
            if before is not None and b.current_healthy < min(b.desired_healthy, before):
                out.add(b.key)
            last[b.key] = b.current_healthy
    return out


def compute(samples: Sequence[Sample], evictions: Sequence[Eviction], horizon: float,
            prices: Mapping[str, float], desired: Mapping[str, int],
            protected: set[str], launch_causes: Mapping[str, int] | None = None,
            timeouts: int = 0, failed_validations: int = 0, quiet: float = 60.0
            ) -> RunMetrics:
    """``desired``: replicas per workload key (``namespace/app``); ``protected``: the keys
    of the never-move workloads."""
    if not samples:
        raise ValueError("a run without a sample")
    first, last = samples[0], samples[-1]
    hours, dollars = integrate(samples, horizon, prices)
    seen = {(p.namespace, p.name): p for s in samples for p in s.pods}
    at_start = {p.uid for p in first.pods}
    counted = [e for e in evictions if not (
        seen[(e.namespace, e.pod)].daemonset if (e.namespace, e.pod) in seen
        else e.pod.startswith("node-agent-"))]
    by_actor = Counter(e.actor for e in counted)
    again = sum(1 for e in counted if (e.namespace, e.pod) in seen
                and seen[(e.namespace, e.pod)].uid not in at_start)
    end_uids = {p.uid for p in last.pods}
    evicted_keys = {(e.namespace, e.pod) for e in evictions}
    moved = {p.uid for p in first.pods if f"{p.namespace}/{p.workload}" in protected
             and (p.uid not in end_uids or (p.namespace, p.name) in evicted_keys)}
    worst: dict[str, int] = defaultdict(int)
    for s in samples:
        ready = Counter(f"{p.namespace}/{p.workload}" for p in s.pods if p.ready)
        for key, want in desired.items():
            worst[key] = max(worst[key], want - ready[key])
    restarted: dict[str, float] = {}
    for key in desired:
        mine = [p for p in first.pods if f"{p.namespace}/{p.workload}" == key]
        if mine:
            restarted[key] = sum(p.uid not in end_uids for p in mine) / len(mine)
    violating = broken_budgets(samples)
    unbound: dict[str, float] = defaultdict(float)
    for s, nxt in zip(samples, [*samples[1:], None], strict=True):
        span = (nxt.t if nxt else horizon) - s.t
        for p in s.pods:
            if not p.node and p.uid not in at_start and not p.daemonset:
                unbound[p.uid] += max(0.0, span)
    launched = len({n.name for s in samples for n in s.nodes} - {n.name for n in first.nodes})
    fresh = {p.uid: p.scheduler for s in samples for p in s.pods
             if p.uid not in at_start and not p.daemonset}
    return RunMetrics(
        horizon, round(hours, 4), round(dollars, 4), len(first.nodes), len(last.nodes),
        last.claims, len(in_use(first)), len(in_use(last)),
        time_to(samples, 0.5), time_to(samples, 0.9), dict(by_actor), again, len(moved),
        dict(worst), restarted, len(violating), max(unbound.values(), default=0.0),
        round(sum(unbound.values()), 1), launched, dict(launch_causes or {}), timeouts,
        failed_validations, _changed_late(samples, quiet), dict(Counter(fresh.values())))
