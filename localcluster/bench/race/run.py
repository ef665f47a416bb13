"""One arm from one restored start over the fixed horizon, on a fresh cluster of its own:
the start restored, the arm set going, the cluster sampled until the horizon, then the
figures, the machine's load average beside them."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import httpx

from localcluster import Cluster, ClusterConfig
from localcluster.bench.race import daycycle
from localcluster.bench.race.arms import THRESHOLD, Arm, begin
from localcluster.bench.race.metrics import RunMetrics, compute
from localcluster.bench.race.restore import create_bound, launch_nodes, protected_keys
from localcluster.bench.race.start import Start
from localcluster.bench.race.timeline import Recorder, dump
from localcluster.cluster import scrape
from localcluster.cluster.control_plane import NodeShape
from localcluster.cluster.karpenter import Karpenter
from localcluster.cluster.stack import CompactorStack

# Karpenter's counters read before and after the horizon.
CREATED: str = "karpenter_nodeclaims_created_total"
TIMEOUTS: str = "karpenter_voluntary_disruption_consolidation_timeouts_total"
FAILED: str = "karpenter_voluntary_disruption_failed_validations_total"
ON_DEMAND_AMD64 = [
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]
# Compactor's own Pods (the compaction scheduler's, the descheduler runs') on a node of their
# own outside Karpenter's pool, where users run them (docs/install.md, "Compactor's own Pods"):
# a Pod of its namespace never moves, so on a pool node it would hold that node for good, a
# node Karpenter's own Pod, running outside the cluster here, never holds.
SYSTEM_NODE: Final = "system-0"
SYSTEM_LABEL: Final = {"race.compactor.test/system": "true"}
SYSTEM_TAINT: Final = {"key": "race.compactor.test/system", "value": "true",
                       "effect": "NoSchedule"}
SYSTEM_PLACEMENT: Final = {
    f"COMPACTION_{component}_{setting}": json.dumps(value)
    for component in ("SCHEDULER", "DESCHEDULER")
    for setting, value in (("NODE_SELECTOR", SYSTEM_LABEL),
                           ("TOLERATIONS", [{**SYSTEM_TAINT, "operator": "Equal"}]))}


@dataclass(frozen=True)
class RunRecord:
    arm: str
    seed: int
    nodes: int
    catalogue: str
    variant: str
    order: int  # the arm's place in its seed's random order
    horizon: float
    load_before: float  # 1-minute load average
    load_after: float
    started_at: str  # UTC
    metrics: RunMetrics
    cycles: tuple[RunMetrics, ...] = ()  # per day cycle, when the run had any
    threshold: int = THRESHOLD  # the underutilization thresholds of Compactor and the recipe

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def _counters(karpenter: Karpenter) -> dict[str, dict[str, float]]:
    text = httpx.get(f"http://127.0.0.1:{karpenter.metrics_port}/metrics", timeout=5).text
    created: dict[str, float] = {}
    for labels, v in scrape.series(text, CREATED):
        created[labels.get("reason", "?")] = created.get(labels.get("reason", "?"), 0.0) + v
    return {"created": created, "timeouts": {"": scrape.value(text, TIMEOUTS)},
            "failed": {"": scrape.value(text, FAILED)}}


def _delta(after: dict[str, float], before: dict[str, float]) -> dict[str, int]:
    return {k: int(v - before.get(k, 0.0)) for k, v in after.items()
            if v - before.get(k, 0.0) > 0}


def race(a: Arm, start: Start, order: int, workdir: Path, horizon: float,
         catalogue: list[dict[str, Any]] | None, log: Callable[[str], None],
         interval: float = 2.0, cycles: int = 0, threshold: int = THRESHOLD) -> RunRecord:
    """``catalogue``: the instance types Karpenter may launch (None: the one shape);
    ``cycles``: day cycles of ``horizon`` seconds each (the run lasts all of them);
    ``threshold``: the underutilization thresholds of Compactor's policy and the recipe."""
    length, horizon = horizon, horizon * max(1, cycles)
    actions = daycycle.plan(start, cycles, length, start.seed) if cycles else []
    prices = {t.name: t.price for t in start.nodes}
    if catalogue:
        prices.update({t["name"]: min(o["Price"] for o in t["offerings"]) for t in catalogue})
    with Cluster(ClusterConfig(workdir=workdir, audit=True)) as cluster:
        cluster.start_workers()
        kube = cluster.client()
        cluster.add_nodes(kube, [SYSTEM_NODE], NodeShape(), labels=SYSTEM_LABEL,
                          taints=[SYSTEM_TAINT])
        stack = None
        if a.compactor:
            stack = CompactorStack(cluster, kube, workdir / "compactor")
            stack.install()
            stack.start_webhook()
            stack.start_controller(extra_env=SYSTEM_PLACEMENT)
        karpenter = Karpenter(cluster, NodeShape(), catalogue=catalogue,
                              requirements=ON_DEMAND_AMD64 if catalogue else None,
                              log_level="debug")
        with karpenter:
            karpenter.install(kube)
            karpenter.start()
            nodes = launch_nodes(kube, karpenter.pool, start)
            create_bound(cluster, kube, start, nodes)
            before = _counters(karpenter)
            load_before = os.getloadavg()[0]
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            recorder = Recorder(cluster, karpenter.pool, interval)
            recorder.start()
            step = begin(a, cluster, kube, karpenter, stack, threshold)
            due = a.cadence / 2 if a.cadence else None
            t0 = time.monotonic()
            while (now := time.monotonic() - t0) < horizon:
                if due is not None and a.cadence is not None and now >= due:
                    log(f"    {a.name}: descheduler at {now:.0f} s evicted {step()}")
                    due += a.cadence
                while actions and actions[0].at <= now:
                    daycycle.apply(kube, actions.pop(0))
                time.sleep(1.0)
            recorder.stop()
            after = _counters(karpenter)
            load_after = os.getloadavg()[0]
            evictions = recorder.evictions()
            kube.close()
    dump(workdir / "timeline.jsonl", recorder.samples, evictions)
    desired = {w.key: w.replicas for w in start.workloads if w.kind != "DaemonSet"}
    m = compute(recorder.samples, evictions, horizon, prices, desired, protected_keys(start),
                _delta(after["created"], before["created"]),
                int(after["timeouts"][""] - before["timeouts"][""]),
                int(after["failed"][""] - before["failed"][""]))
    per_cycle = tuple(compute(s, e, length, prices, desired, protected_keys(start))
                      for s, e in daycycle.windows(recorder.samples, evictions, cycles, length)
                      if s) if cycles else ()
    record = RunRecord(a.name, start.seed, len(start.nodes), start.catalogue,
                       start.variant.value, order, horizon, round(load_before, 2),
                       round(load_after, 2), stamp, m, per_cycle, threshold)
    log(f"  {a.name:22s} seed={start.seed}: {m.nodes_start} -> {m.nodes_end} nodes "
        f"({m.in_use_before} -> {m.in_use_after} in use), {m.node_hours:.3f} node-h, "
        f"${m.dollars:.3f}, evictions {m.evictions}, protected moved {m.protected_moved}, "
        f"PDB {m.pdb_violations}, launched {m.launched} {m.launched_by_cause}, "
        f"new Pods by scheduler {m.new_pods_by_scheduler}, "
        f"cut {m.cut}, load {load_before:.1f}/{load_after:.1f}, "
        f"{recorder.errors} failed samples")
    return record
