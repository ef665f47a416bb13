"""Compaction at scale, for `make bench-e2e`: the demo's mix of workloads on 100 kwok nodes,
spread by the default scheduler, compacted by the plan alone.

The demo's 12-node mix (and what must never move) scaled to ``nodes``, from a spread start
that nothing re-admits (``setLabelsByEviction: false``, thresholds at 100 %), with limits
sized for a cluster of that size: several drains at once and a few evictions per descheduler
run. Judged as the demo is: nodes after against the first-fit-decreasing packing (at most one
more), 0 futile evictions; reported with the time to converge and the evictions per freed
node.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from localcluster import Cluster, ClusterConfig
from localcluster.cluster.stack import start_local
from localcluster.demo.compaction_run import run
from localcluster.demo.measure import Report
from localcluster.demo.scenario import App, Scenario, spread_overrides, standard


def scenario(nodes: int) -> Scenario:
    """The demo's apps with their replicas scaled from 12 nodes to ``nodes``."""
    demo = standard()
    apps = tuple(App(a.namespace, a.name, max(1, round(a.replicas * nodes / demo.nodes)),
                     a.cpu, a.memory, a.kind) for a in demo.apps)
    return Scenario(nodes=nodes, apps=apps, policy_spec=demo.policy_spec)


def overrides(s: Scenario) -> dict[str, Any]:
    """The spread start's policy, with limits for ``s.nodes`` nodes: one drain and one
    eviction per run per 10 nodes (one per node and run, as in the demo)."""
    spread = spread_overrides(s)
    per_run = max(1, s.nodes // 10)
    spread["descheduler"] = {**spread["descheduler"], "maxDrainingNodes": per_run,
                             "maxNoOfPodsToEvictPerNode": 1,
                             "maxNoOfPodsToEvictPerNamespace": per_run,
                             "maxNoOfPodsToEvictTotal": per_run}
    return spread


def measure(nodes: int) -> Report:
    s = scenario(nodes)
    workdir = Path(tempfile.mkdtemp(prefix=f"compactor-compaction-{nodes}-"))
    with Cluster(ClusterConfig(workdir=workdir, start_timeout=300)) as cluster:
        kube, stack = start_local(cluster, workdir / "compactor")
        print(f"compaction at {nodes} nodes: {s.expected_pods} Pods, spread ...", flush=True)
        return run(cluster, kube, stack, s, interval=1.0, max_runs=400, max_seconds=1800,
                   **overrides(s)).report


def table(reports: Sequence[tuple[int, Report]]) -> str:
    head = ("| nodes | nodes after | FFD packing | packing around unmovable Pods | lower bound "
            "| futile evictions | descheduler evictions | evictions per freed node "
            "| protected moved, PDB violations | converge |\n" + "|---" * 10 + "|")
    rows = [f"| {n} | {r.nodes_after} | {r.ffd_packing} | {r.ffd_around_blockers} "
            f"| {r.lower_bound} | {r.futile_evictions} | {r.descheduler_evictions} "
            f"| {_per_freed(r)} | {r.protected_moved}, {r.pdb_violations} | {r.seconds:.0f} s |"
            for n, r in reports]
    return "\n".join([head, *rows])


def _per_freed(r: Report) -> str:
    freed = r.nodes_before - r.nodes_after
    return f"{r.descheduler_evictions / freed:.1f}" if freed > 0 else "—"


def verdicts(reports: Sequence[tuple[int, Report]]) -> list[tuple[str, bool, str]]:
    out = []
    for n, r in reports:
        out += [
            (f"compaction at {n} nodes: nodes after <= FFD packing + 1",
             r.nodes_after <= r.ffd_packing + 1, f"{r.nodes_after} against {r.ffd_packing}"),
            (f"compaction at {n} nodes: 0 futile evictions", r.futile_evictions == 0,
             f"{r.futile_evictions} ({r.late_evictions} late, {r.bounced} bounced back)"),
            (f"compaction at {n} nodes: protected Pods moved 0, PDB violations 0",
             r.protected_moved == 0 and r.pdb_violations == 0,
             f"{r.protected_moved}, {r.pdb_violations}"),
        ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=100)
    args = parser.parse_args()
    reports = [(args.nodes, measure(args.nodes))]
    print(table(reports))
    checks = verdicts(reports)
    for name, ok, detail in checks:
        print(f"{'PASS' if ok else 'FAIL'}: {name} ({detail})")
    raise SystemExit(0 if all(ok for _, ok, _ in checks) else 1)


if __name__ == "__main__":
    main()
