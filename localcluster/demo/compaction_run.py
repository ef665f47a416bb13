"""Run a compaction on the local cluster and measure it: the shared core of `make demo`
and the end-to-end test."""

from __future__ import annotations

import json
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from compaction import names
from compaction.packing import ffd_around, ffd_packing, lower_bound
from localcluster.cluster.control_plane import Cluster
from localcluster.cluster.karpenter import NodeCensus
from localcluster.cluster.kube import Kube, path, wait_for
from localcluster.cluster.stack import DeschedulerRun
from localcluster.demo.evictions import among, by_workload, came_back
from localcluster.demo.measure import (
    PodFact,
    Report,
    cpu_by_node,
    cpu_millis,
    mem_bytes,
    nodes_with,
    snapshot,
)
from localcluster.demo.nodepool import NodePool
from localcluster.demo.pod_watch import PodWatch
from localcluster.demo.scenario import (
    Provision,
    Scenario,
    TeamPolicy,
    apply_policy,
    create,
    settled,
)

PASSES = "compactor_reconcile_duration_seconds_count"  # the controller's completed passes


class Stack(Protocol):
    """What a run asks of Compactor: its parts as processes (``CompactorStack``), or as Pods
    deployed on a real node (``localcluster.node.deployed.DeployedStack``)."""

    def start_scheduler(self) -> object: ...

    def run_descheduler(self, policy: str) -> DeschedulerRun: ...

    def controller_metric(self, name: str, **labels: str) -> float: ...


@dataclass
class Outcome:
    report: Report
    before: list[PodFact]
    after: list[PodFact]
    runs: list[DeschedulerRun] = field(default_factory=list)
    cpu_before: dict[str, int] = field(default_factory=dict)
    cpu_after: dict[str, int] = field(default_factory=dict)
    forecast: dict[str, Any] = field(default_factory=dict)  # the plugin's -o json
    nodes: NodeCensus | None = None  # the NodePool's, when Karpenter made the nodes


def _awaiting_hook(kube: Kube, scenario: Scenario, pods: list[PodFact]) -> list[PodFact]:
    """Managed Pods admitted without the compaction state (placed before the policy, or
    admitted while the webhook's cache was stale) on a node a policy's plan frees: the
    runtime hook replaces them. It leaves alone those of the nodes the plans keep."""
    freeable = {n for team in scenario.policies for n in _plan(kube, team).get(
        "freeableNodes", ())}
    return [p for p in pods if p.managed and p.scheduler != names.MANAGED_SCHEDULER
            and p.node in freeable]


def _plan(kube: Kube, team: TeamPolicy) -> dict[str, Any]:
    return (kube.get(team.path).get("status") or {}).get("plan") or {}


def _wait(kube: Kube, scenario: Scenario, timeout: float, hook: bool = False) -> None:
    """Until the scenario is settled (and, with ``hook``, nothing awaits the runtime hook);
    bounded: the assertions judge a run that never settles."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if settled(kube, scenario) and not (
                hook and _awaiting_hook(kube, scenario, snapshot(kube))):
            return
        time.sleep(0.3)


def _plans_more(kube: Kube, scenario: Scenario, pods: list[PodFact]) -> bool:
    """A policy's status shows a node it can still free or is draining that carries a Pod the
    compaction may move. A node the plan calls freeable but that only a placeholder or a
    DaemonSet Pod holds gives a drain nothing to evict (an autoscaler removes it, or not),
    so waiting for it cannot lower the nodes carrying managed Pods."""
    movable = nodes_with(p for p in pods if p.managed)
    for team in scenario.policies:
        plan = _plan(kube, team)
        if movable & {*plan.get("freeableNodes", ()), *plan.get("drainingNodes", ())}:
            return True
    return False


def policy_documents(scenario: Scenario, **overrides: Any) -> list[dict[str, Any]]:
    """The scenario's policies as ``apply_policy`` applies them, as a policy file holds them."""
    docs = []
    for team in scenario.policies:
        meta: dict[str, Any] = {"name": team.name}
        if team.namespace:
            meta["namespace"] = team.namespace
        docs.append({"apiVersion": names.API_VERSION, "kind": team.kind, "metadata": meta,
                     "spec": {**team.spec, **overrides}})
    return docs


def forecast(cluster: Cluster, scenario: Scenario, **policy: Any) -> dict[str, Any]:
    """What ``kubectl compactor plan -f POLICY -o json`` says of the cluster as it is now, with
    the scenario's policies (``policy`` over their specs) given as files: the plugin itself,
    in-process, against the local cluster's kubeconfig."""
    from kubectl_compactor import cli as preview_cli

    with tempfile.TemporaryDirectory(prefix="compactor-forecast-") as tmp:
        file = Path(tmp) / "policies.yaml"
        file.write_text(yaml.safe_dump_all(policy_documents(scenario, **policy)))
        code, out, errors = preview_cli.run(["plan", "-f", str(file), "--kubeconfig",
                                             str(cluster.kubeconfig), "-o", "json"])
    assert code == 0, errors
    found: dict[str, Any] = json.loads(out)
    return found


def _scheduler_pod_placed(kube: Kube, scenario: Scenario, **policy: Any) -> None:
    """Wait until the compaction scheduler's Pod is bound, where a policy asks for it."""
    if not any(({**team.spec, **policy}.get("scheduler") or {}).get("useManagedScheduler")
               for team in scenario.policies):
        return
    wait_for("the compaction scheduler's Pod placed", lambda: any(
        p["spec"].get("nodeName") for p in kube.items(
            path("pods", names.INSTALL_NAMESPACE), "app.kubernetes.io/component=scheduler")),
        timeout=120)


def run(cluster: Cluster, kube: Kube, stack: Stack, scenario: Scenario,
        interval: float = 1.0, quiet_runs: int = 3, max_runs: int = 200,
        max_seconds: float = 600.0, patience: int = 6, log: bool = False,
        pool: NodePool | None = None, provision: Provision | None = None,
        **policy: Any) -> Outcome:
    """Create the scenario, apply its policy (``policy`` overrides fields of its spec) and run
    the descheduler every ``interval`` the way its CronJob would, until nothing changes. With
    ``pool``, Karpenter makes the nodes and removes those the compaction empties; with
    ``provision``, that makes them (a real node's harness, say)."""
    node_names = create(cluster, kube, scenario,
                        provision=pool.provision if pool is not None else provision)
    watch = PodWatch(kube).start()
    try:
        return _compact(cluster, kube, stack, scenario, node_names, watch, interval=interval,
                        quiet_runs=quiet_runs, max_runs=max_runs, max_seconds=max_seconds,
                        patience=patience, log=log, pool=pool, **policy)
    finally:
        watch.stop()


def _compact(cluster: Cluster, kube: Kube, stack: Stack, scenario: Scenario,
             node_names: list[str], watch: PodWatch, interval: float, quiet_runs: int,
             max_runs: int, max_seconds: float, patience: int, log: bool,
             pool: NodePool | None, **policy: Any) -> Outcome:
    """``run`` once the scenario stands, its Pods watched from before the policy on."""
    before = snapshot(kube)
    started = time.monotonic()
    if pool is not None:
        pool.arm(kube)
    apply_policy(kube, scenario, **policy)
    # Forecast once Compactor's own scheduler Pod is placed (the default scheduler puts it on
    # a sparse node, which it then keeps: its namespace is never evicted) and before its
    # process runs, so before anything moved: the cluster the drains start from.
    _scheduler_pod_placed(kube, scenario, **policy)
    predicted = forecast(cluster, scenario, **policy)
    stack.start_scheduler()
    runs: list[DeschedulerRun] = []  # every policy's, one after the other
    rounds: list[DeschedulerRun] = []  # per round, every policy's evictions together
    quiet = 0
    # The controller's completed passes when a round first found nothing to do: the policy's
    # status speaks of the cluster as it is only after a pass that began later has ended
    # (while the runtime hook works the planner starts no drain, and the status says so
    # until the next pass), and on a loaded machine that can take longer than a few rounds.
    clean_since: float | None = None
    seen_on: dict[str, set[str]] = defaultdict(set)  # node -> managed Pod uids seen there
    # A run improves on the ones before it when it lowers the nodes carrying managed Pods or
    # the nodes kept (held by a Pod the plan leaves, as the forecast counts): a drain that
    # moves a node's last movable Pod onto a node a kube-system Pod holds anyway frees a node
    # without lowering the first count.
    best, best_kept, improved_at = scenario.nodes + 1, scenario.nodes + 1, 0
    previous: list[PodFact] = before
    last: DeschedulerRun | None = None
    hook = any({**team.spec, **policy}.get("setLabelsByEviction")
               for team in scenario.policies)
    while len(rounds) < max_runs and time.monotonic() - started < max_seconds:
        time.sleep(interval)
        _wait(kube, scenario, timeout=30)
        now = snapshot(kube)
        # Where the last round's evictees came back, and through which scheduler: a futile
        # eviction's replacement on a node no managed Pod held says which of the two erred.
        arrived: list[str] = []
        if last is not None and last.evicted:
            held = nodes_with(p for p in previous if p.managed)
            known = {p.uid for p in previous}
            arrived = [f"{p.namespace}/{p.name} on {p.node or '(pending)'}"
                       f"{'' if not p.node or p.node in held else ' (a node no managed Pod held)'}"
                       f" by {p.scheduler}, {p.phase}"
                       for p in now if p.managed and p.uid not in known]
        for p in now:
            if p.managed and p.node:
                seen_on[p.node].add(p.uid)
        previous = now
        pending_hook = _awaiting_hook(kube, scenario, now) if hook else []
        in_use = len(nodes_with(p for p in now if p.managed))
        kept = len(nodes_with(p for p in now if p.stays))
        if in_use < best or kept < best_kept:
            improved_at = len(rounds)
        best, best_kept = min(best, in_use), min(best_kept, kept)
        # Each policy's CronJob would run on its own schedule; here one after the other.
        each = [stack.run_descheduler(team.id) for team in scenario.policies]
        runs += each
        result = DeschedulerRun([e for r in each for e in r.evicted],
                                "".join(r.log for r in each))
        rounds.append(result)
        last = result
        if log:
            print(f"  run {len(rounds):3d}: {len(result.evicted)} evicted, "
                  f"{len(pending_hook)} Pods awaiting the runtime hook, {in_use} nodes carry "
                  f"managed Pods, {kept} kept"
                  + "".join(f"\n    evicted {pod} from {node}" for pod, node in result.evicted)
                  + "".join(f"\n    came back: {line}" for line in arrived),
                  flush=True)
        passes = stack.controller_metric(PASSES)
        if result.evicted or pending_hook:
            clean_since = None
        elif clean_since is None:
            clean_since = passes
        # Two more passes: the later one began after this round's reading.
        seen = clean_since is not None and passes >= clean_since + 2
        more = _plans_more(kube, scenario, now)
        quiet = quiet + 1 if not result.evicted and not pending_hook and not more else 0
        # Converged: nothing left to evict and nothing more planned, or no node freed for a
        # while (longer while the controller still plans a drain: one takes a pass to start).
        stale = len(rounds) - improved_at
        if seen and (quiet >= quiet_runs
                     or (not pending_hook and stale >= patience * (3 if more else 1))):
            break
    # The last run's replacements go through admission like any other; let the hook finish.
    _wait(kube, scenario, timeout=60, hook=hook)
    seconds = time.monotonic() - started
    census = pool.settle(kube) if pool is not None else None
    if census is not None:
        _wait(kube, scenario, timeout=60, hook=hook)
    after = snapshot(kube)
    watched = watch.stop()
    back = came_back(watched.evictions, watched.arrivals.values())
    kept_nodes = nodes_with(p for p in after if p.stays)
    shape = scenario.shape
    ds_cpu = max((p.cpu for p in after if p.app == "node-agent"), default=0)
    ds_mem = max((p.memory for p in after if p.app == "node-agent"), default=0)
    managed_after = [p for p in after if p.managed]
    items = [(p.cpu, p.memory) for p in managed_after]
    cpu, memory = cpu_millis(shape.cpu) - ds_cpu, mem_bytes(shape.memory) - ds_mem
    freed = nodes_with(p for p in before if p.managed) - nodes_with(managed_after)
    fixed: dict[str, tuple[int, int]] = {}
    for p in after:
        if p.immovable and p.node:
            c, m = fixed.get(p.node, (0, 0))
            fixed[p.node] = (c + p.cpu, m + p.memory)
    riders = [(p.cpu, p.memory) for p in after
              if p.protected and not p.immovable and p.app != "node-agent"]
    evictions = [e for r in runs for e in r.evicted]
    # A node an autoscaler removed takes its DaemonSet Pod with it: that is no move.
    removed = nodes_with(before) - nodes_with(after)
    protected_before = {p.uid for p in before if p.protected
                        and not (p.app == "node-agent" and p.node in removed)}
    protected_after = {p.uid for p in after if p.protected}
    payments_before = {p.uid for p in before if p.app == "payments"}
    report = Report(
        nodes_before=len(nodes_with(p for p in before if p.managed)),
        nodes_after=len(nodes_with(managed_after)),
        in_use_before=len(nodes_with(p for p in before if p.app != "node-agent")),
        in_use_after=len(nodes_with(p for p in after if p.app != "node-agent")),
        ffd_around_blockers=ffd_around(fixed, items + riders, cpu, memory),
        ffd_packing=ffd_packing(items, cpu, memory),
        lower_bound=lower_bound(items, cpu, memory, int(shape.pods) - 1),
        runtime_evictions=int(stack.controller_metric("compactor_runtime_evictions_total",
                                                      result="evicted")),
        descheduler_evictions=len(evictions),
        late_evictions=sum(len(r.evicted) for r in rounds[improved_at + 1:]),
        bounced=among(back, evictions),
        evictions_off_freed=sum(1 for _, node in evictions if node in freed),
        movable_on_freed=sum(len(seen_on[n]) for n in freed),
        descheduler_runs=improved_at + 1,
        seconds=seconds,
        pdb_violations=len(payments_before - {p.uid for p in after}),
        protected_moved=len(protected_before - protected_after),
        nodes_total=scenario.nodes,
        predicted_after=int(predicted["nodesAfter"]),
        kept_after=len(kept_nodes),
        predicted_in_use=len(predicted["nodesInUse"]),
        predicted_freeable=len(predicted["freeable"]),
        nodes_removed=census.removed if census else None,
        nodes_launched=census.launched if census else None,
        seconds_to_last_removal=census.seconds_to_last_removal if census else None,
        landings={o: int(stack.controller_metric("compactor_drain_landings_total", outcome=o))
                  for o in ("planned_node", "kept_node", "free_node")},
        evictions=len(watched.evictions),
        came_back=len(back),
        came_back_by=by_workload(back),
        kept_before=len(nodes_with(p for p in before if p.stays)),
        evictions_from_kept=sum(e.node in kept_nodes for e in watched.evictions),
    )
    return Outcome(report, before, after, runs, cpu_by_node(before, node_names),
                   cpu_by_node(after, node_names), predicted, census)
