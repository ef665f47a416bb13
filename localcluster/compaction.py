"""Run a compaction on the local cluster and measure it: the shared core of `make demo`
and the end-to-end test."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from localcluster.cluster import Cluster
from localcluster.kube import Kube
from localcluster.measure import (
    PodFact,
    Report,
    cpu_by_node,
    cpu_millis,
    ffd_lower_bound,
    mem_bytes,
    nodes_with,
    snapshot,
)
from localcluster.scenario import POLICY, Scenario, apply_policy, create, settled
from localcluster.stack import CompactorStack, DeschedulerRun


@dataclass
class Outcome:
    report: Report
    before: list[PodFact]
    after: list[PodFact]
    runs: list[DeschedulerRun] = field(default_factory=list)
    cpu_before: dict[str, int] = field(default_factory=dict)
    cpu_after: dict[str, int] = field(default_factory=dict)


def _awaiting_hook(pods: list[PodFact]) -> list[PodFact]:
    """Managed Pods admitted without the compaction state (placed before the policy, or
    admitted while the webhook's cache was stale): the runtime hook replaces them."""
    return [p for p in pods if p.managed and p.scheduler != "compactor-scheduler"]


def _wait(kube: Kube, scenario: Scenario, timeout: float, hook: bool = False) -> None:
    """Until the scenario is settled (and, with ``hook``, nothing awaits the runtime hook);
    bounded: the assertions judge a run that never settles."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if settled(kube, scenario) and not (hook and _awaiting_hook(snapshot(kube))):
            return
        time.sleep(0.3)


def run(cluster: Cluster, kube: Kube, stack: CompactorStack, scenario: Scenario,
        interval: float = 1.0, quiet_runs: int = 3, max_runs: int = 200,
        max_seconds: float = 600.0, patience: int = 6, log: bool = False) -> Outcome:
    create(cluster, kube, scenario)
    before = snapshot(kube)
    started = time.monotonic()
    apply_policy(kube, scenario)
    stack.start_scheduler()
    runs: list[DeschedulerRun] = []
    quiet = 0
    best, improved_at = scenario.nodes + 1, 0
    while len(runs) < max_runs and time.monotonic() - started < max_seconds:
        time.sleep(interval)
        _wait(kube, scenario, timeout=30)
        now = snapshot(kube)
        pending_hook = _awaiting_hook(now)
        in_use = len(nodes_with(p for p in now if p.managed))
        if in_use < best:
            best, improved_at = in_use, len(runs)
        result = stack.run_descheduler(POLICY)
        runs.append(result)
        if log:
            print(f"  run {len(runs):3d}: {len(result.evicted)} evicted, "
                  f"{len(pending_hook)} Pods awaiting the runtime hook, {in_use} nodes in use",
                  flush=True)
        quiet = quiet + 1 if not result.evicted and not pending_hook else 0
        # Converged: nothing left to evict, or evictions that no longer free any node (a
        # Pod that fits nowhere denser comes back to its node: see the README).
        if quiet >= quiet_runs or (not pending_hook and len(runs) - improved_at >= patience):
            break
    # The last run's replacements go through admission like any other; let the hook finish.
    _wait(kube, scenario, timeout=60, hook=True)
    seconds = time.monotonic() - started
    after = snapshot(kube)
    shape = scenario.shape
    ds_cpu = max((p.cpu for p in after if p.app == "node-agent"), default=0)
    ds_mem = max((p.memory for p in after if p.app == "node-agent"), default=0)
    managed_after = [p for p in after if p.managed]
    lower = ffd_lower_bound([(p.cpu, p.memory) for p in managed_after],
                            cpu_millis(shape.cpu) - ds_cpu, mem_bytes(shape.memory) - ds_mem)
    protected_before = {p.uid for p in before if p.protected}
    protected_after = {p.uid for p in after if p.protected}
    payments_before = {p.uid for p in before if p.app == "payments"}
    report = Report(
        nodes_before=len(nodes_with(p for p in before if p.managed)),
        nodes_after=len(nodes_with(managed_after)),
        lower_bound=lower,
        runtime_evictions=int(stack.controller_metric("compactor_runtime_evictions_total",
                                                      result="evicted")),
        descheduler_evictions=sum(len(r.evicted) for r in runs[:improved_at + 1]),
        futile_evictions=sum(len(r.evicted) for r in runs[improved_at + 1:]),
        descheduler_runs=improved_at + 1,
        seconds=seconds,
        pdb_violations=len(payments_before - {p.uid for p in after}),
        protected_moved=len(protected_before - protected_after),
        nodes_total=scenario.nodes,
    )
    return Outcome(report, before, after, runs,
                   cpu_by_node(before, scenario.node_names),
                   cpu_by_node(after, scenario.node_names))
