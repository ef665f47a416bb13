"""`make bench-peers`, part two (not in CI): four contenders compact the same seeded,
fragmented cluster whose nodes Karpenter made, each on a fresh cluster.

The cluster: Karpenter provisions N nodes for a load spike; a seeded mix of Deployments (with
what must never move: a PDB with ``maxUnavailable: 0``, ``safe-to-evict: "false"``, a
``kube-system`` Deployment, two priority -10 placeholders, a DaemonSet) is spread over them by
the default scheduler; then the load drops (each Deployment scaled down by a seeded share).
The contenders, from that state:

1. ``karpenter``: Karpenter ``WhenEmptyOrUnderutilized`` alone, what a Karpenter user has;
2. ``recipe``: the descheduler's ``HighNodeUtilization`` (thresholds of the demo's policy) with
   the default scheduler scoring ``MostAllocated``, plus Karpenter ``WhenEmpty``;
3. ``compactor``: Compactor (the demo's policy, ``setLabelsByEviction: true``: the runtime hook
   re-admits every Pod placed before the policy) plus Karpenter ``WhenEmpty``;
4. ``compactor-in-place``: the same with ``setLabelsByEviction: false``, the reference's
   default: those Pods are labelled in place and only the drains evict.

Each runs until nothing changes (no node and no Pod for ``quiet`` seconds). Reported: nodes in
use after beside the packing around the unmovable Pods and the lower bound; evictions (the API
server's audit log), per node removed, and those whose Pod came back to the node it left;
protected Pods moved and PDB violations; NodeClaims launched; the time until nothing changed.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

import httpx
import yaml

from compaction.packing import ffd_around, lower_bound
from localcluster import Cluster, ClusterConfig, Kube
from localcluster.cluster.karpenter import Consolidation, Karpenter, NodeWatch, provision
from localcluster.cluster.kube import path
from localcluster.cluster.process import free_port
from localcluster.cluster.stack import CompactorStack
from localcluster.demo.measure import PodFact, cpu_millis, mem_bytes, nodes_with, snapshot
from localcluster.demo.scenario import (
    App,
    Scenario,
    apply_policy,
    create,
    policy_spec,
    settled,
)

CONTENDERS = ("karpenter", "recipe", "compactor", "compactor-in-place")
# Compactor with the policy's setLabelsByEviction as the reference defaults it (false): the
# Pods placed before the policy keep their scheduler and only drains evict.
IN_PLACE: Final = "compactor-in-place"
SIZES = (0.25, 0.5, 0.75, 1.0)  # CPU of a replica; memory is 2 GiB a CPU, rounded
THRESHOLD = 65  # the demo policy's HighNodeUtilization thresholds, for the recipe too


def seeded(nodes: int, seed: int) -> tuple[Scenario, Scenario]:
    """The peak and, after the load drops, the quiet scenario: the same Deployments, each
    scaled down by a seeded share. At the peak the requests fill about 55 % of the nodes."""
    rng = random.Random(seed)
    apps, budget = [], nodes * 4 * 0.55
    i = 0
    while budget > 0:
        cpu = rng.choice(SIZES)
        replicas = rng.randint(2, 6)
        ns = ("production", "batch")[i % 2]
        apps.append(App(ns, f"app-{i}", replicas, f"{int(cpu * 1000)}m",
                        f"{max(256, int(cpu * 2048))}Mi"))
        budget -= cpu * replicas
        i += 1
    peak = Scenario(nodes=nodes, policy_spec=policy_spec(max(1, nodes // 12), by_eviction=True),
                    apps=tuple(apps))
    quiet = replace(peak, apps=tuple(
        replace(a, replicas=max(1, round(a.replicas * rng.uniform(0.3, 0.7)))) for a in apps))
    return peak, quiet


def _scale(kube: Kube, scenario: Scenario) -> None:
    for a in scenario.apps:
        kube.patch(path("deployments", a.namespace, a.name, sub="scale"),
                   {"spec": {"replicas": a.replicas}})


def _evictions(audit: Path, offset: int) -> tuple[list[tuple[str, str]], int]:
    """(namespace, name) of each eviction the API server granted after ``offset`` bytes."""
    out: list[tuple[str, str]] = []
    if not audit.exists():
        return out, offset
    with audit.open("rb") as f:
        f.seek(offset)
        data = f.read()
    whole = data[:data.rfind(b"\n") + 1]
    for line in whole.splitlines():
        e = json.loads(line)
        ref = e.get("objectRef") or {}
        if (e.get("verb") == "create" and ref.get("subresource") == "eviction"
                and e.get("stage") == "ResponseComplete"
                and (e.get("responseStatus") or {}).get("code") in (200, 201)):
            out.append((ref.get("namespace", ""), ref.get("name", "")))
    return out, offset + len(whole)


@dataclass(frozen=True)
class Result:
    contender: str
    nodes: int
    seed: int
    in_use_before: int
    in_use_after: int
    ffd_around: int
    lower_bound: int
    evictions: int
    removed: int
    bounced: int
    protected_moved: int
    pdb_violations: int
    launched: int
    seconds: float
    # Nodes in use after that only placeholders or Compactor's own Pods hold (and DaemonSets).
    held_by_riders: int = 0

    @property
    def per_removed(self) -> float | None:
        return self.evictions / self.removed if self.removed else None


def _in_use(pods: Sequence[PodFact]) -> set[str]:
    return nodes_with(p for p in pods if p.app != "node-agent")


def _held_by_riders(after: Sequence[PodFact]) -> int:
    """Nodes in use whose Pods (DaemonSets aside) are all placeholders or Compactor's own."""
    by_node: dict[str, set[bool]] = defaultdict(set)
    for p in after:
        if p.node and p.app != "node-agent":
            rider = p.namespace == "compactor-system" or p.app == "capacity-reservation"
            by_node[p.node].add(rider)
    return sum(1 for kinds in by_node.values() if kinds == {True})


def _packing(after: Sequence[PodFact], shape_cpu: int, shape_mem: int) -> tuple[int, int]:
    """The packing around the Pods that cannot move (left where they are) and the lower bound
    of the movable requests."""
    ds_cpu = max((p.cpu for p in after if p.app == "node-agent"), default=0)
    ds_mem = max((p.memory for p in after if p.app == "node-agent"), default=0)
    cpu, mem = shape_cpu - ds_cpu, shape_mem - ds_mem
    fixed: dict[str, tuple[int, int]] = {}
    for p in after:
        if p.immovable and p.node:
            c, m = fixed.get(p.node, (0, 0))
            fixed[p.node] = (c + p.cpu, m + p.memory)
    items = [(p.cpu, p.memory) for p in after if p.managed]
    riders = [(p.cpu, p.memory) for p in after
              if p.protected and not p.immovable and p.app != "node-agent"]
    return ffd_around(fixed, items + riders, cpu, mem), lower_bound(items, cpu, mem, 109)


def _recipe_scheduler(cluster: Cluster) -> None:
    """The default scheduler replaced by one scoring MostAllocated, as the recipe runs it."""
    cluster.process("kube-scheduler").stop()
    cluster.processes.remove(cluster.process("kube-scheduler"))
    config = cluster.dir / "most-allocated.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(cluster.kubeconfig), "qps": 200, "burst": 400},
        "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [{
            "name": "NodeResourcesFit", "args": {"scoringStrategy": {
                "type": "MostAllocated",
                "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}}}]}],
    }))
    cluster.start_scheduler(name="kube-scheduler-most-allocated", config=config)


def _recipe_descheduler(cluster: Cluster) -> Callable[[], int]:
    """One descheduler run of HighNodeUtilization with the default evictor, as the recipe
    configures it (kube-system left out); returns how many Pods it evicted."""
    import subprocess

    policy = cluster.dir / "recipe-descheduler.yaml"
    policy.write_text(yaml.safe_dump({
        "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
        "profiles": [{"name": "recipe", "pluginConfig": [
            {"name": "DefaultEvictor", "args": {"nodeFit": True}},
            {"name": "HighNodeUtilization", "args": {
                "thresholds": {"cpu": THRESHOLD, "memory": THRESHOLD, "pods": THRESHOLD},
                "evictableNamespaces": {"exclude": ["kube-system"]}}}],
            "plugins": {"balance": {"enabled": ["HighNodeUtilization"]}}}]}))

    def run() -> int:
        out = subprocess.run(
            [str(cluster.bin / "descheduler"), f"--kubeconfig={cluster.kubeconfig}",
             f"--policy-config-file={policy}", "--v=3", "--bind-address=127.0.0.1",
             f"--secure-port={free_port()}", f"--cert-dir={cluster.dir / 'descheduler-certs'}"],
            capture_output=True, text=True, timeout=300, check=False)
        with (cluster.dir / "logs" / "recipe-descheduler.log").open("a") as f:
            f.write(out.stdout + out.stderr)
        return (out.stdout + out.stderr).count('"Evicted pod"')
    return run


def race(contender: str, nodes: int, seed: int, workdir: Path, quiet: float,
         max_seconds: float, log: Callable[[str], None]) -> Result:
    """One contender on a fresh cluster seeded with ``seed``."""
    peak, after_drop = seeded(nodes, seed)
    with Cluster(ClusterConfig(workdir=workdir, audit=True)) as cluster:
        cluster.start_workers()
        kube = cluster.client()
        stack = None
        if contender.startswith("compactor"):
            stack = CompactorStack(cluster, kube, workdir / "compactor")
            stack.install()
            stack.start_webhook()
            stack.start_controller()
        with Karpenter(cluster, peak.shape) as karpenter:
            karpenter.install(kube)
            karpenter.start()
            create(cluster, kube, peak, provision=lambda k, s: provision(
                k, karpenter.pool, s.nodes, s.shape, timeout=600))
            _scale(kube, after_drop)
            _settle(kube, after_drop, 300)
            before = snapshot(kube)
            _, offset = _evictions(cluster.audit_log, 0)
            watch = NodeWatch(cluster, karpenter.pool)
            watch.start(kube)
            started = time.monotonic()
            step: Callable[[], int] = lambda: 0  # noqa: E731
            if contender == "karpenter":
                karpenter.set_pool(kube, Consolidation("WhenEmptyOrUnderutilized", "0s"))
            elif contender == "recipe":
                _recipe_scheduler(cluster)
                karpenter.set_pool(kube, Consolidation("WhenEmpty", "5s"))
                step = _recipe_descheduler(cluster)
            else:
                assert stack is not None
                karpenter.set_pool(kube, Consolidation("WhenEmpty", "5s"))
                apply_policy(kube, after_drop, **(
                    {"setLabelsByEviction": False} if contender == IN_PLACE else {}))
                stack.start_scheduler()
                step = lambda: len(stack.run_descheduler(  # noqa: E731
                    after_drop.policies[0].id).evicted)
            evicted: list[tuple[str, str, str]] = []  # namespace, name, node it left
            where: dict[tuple[str, str], str] = {(p.namespace, p.name): p.node for p in before}
            state, changed = _state(kube), time.monotonic()
            while time.monotonic() - started < max_seconds:
                step()
                time.sleep(1.0)
                new, offset = _evictions(cluster.audit_log, offset)
                try:
                    for p in snapshot(kube):
                        where.setdefault((p.namespace, p.name), p.node)
                    now = _state(kube)
                except httpx.HTTPError:  # a busy API server: the next round asks again
                    now = state
                evicted += [(ns, n, where.get((ns, n), "")) for ns, n in new]
                if now != state:
                    state, changed = now, time.monotonic()
                elif time.monotonic() - changed >= quiet and settled(kube, after_drop):
                    break
            seconds = changed - started
            if contender.startswith("compactor"):
                _log_plan(kube, after_drop, log)
            watch.stop()
            census = watch.census(kube)
            after = snapshot(kube)
            kube.close()
    shape_cpu, shape_mem = cpu_millis(peak.shape.cpu), mem_bytes(peak.shape.memory)
    packing, bound = _packing(after, shape_cpu, shape_mem)
    gone = nodes_with(before) - nodes_with(after)
    protected_before = {p.uid for p in before if p.protected
                        and not (p.app == "node-agent" and p.node in gone)}
    result = Result(
        contender, nodes, seed, len(_in_use(before)), len(_in_use(after)), packing, bound,
        len(evicted), census.removed, _bounced(evicted, before, after),
        len(protected_before - {p.uid for p in after}),
        len({p.uid for p in before if p.app == "payments"} - {p.uid for p in after}),
        census.launched, seconds, _held_by_riders(after))
    log(f"  {contender:9s} nodes={nodes} seed={seed}: in use {result.in_use_before} -> "
        f"{result.in_use_after} (packing {packing}, bound {bound}), {result.evictions} "
        f"evictions, {result.removed} removed, {result.launched} launched, "
        f"{result.bounced} bounced, protected moved {result.protected_moved}, PDB "
        f"{result.pdb_violations}, {seconds:.0f} s, {result.held_by_riders} held only by "
        "placeholders or Compactor's Pods")
    return result


def _log_plan(kube: Kube, scenario: Scenario, log: Callable[[str], None]) -> None:
    """What the policy's status says keeps each node it cannot free, by the first reason."""
    team = scenario.policies[0]
    plan = (kube.get(team.path).get("status") or {}).get("plan") or {}
    reasons = Counter(u["reasons"][0].split(": ")[-1][:60] if u.get("reasons") else "?"
                      for u in plan.get("unremovable", []))
    log(f"    plan: {plan.get('nodesInUse')} in use, freeable {plan.get('freeableNodes')}, "
        f"draining {plan.get('drainingNodes')}; kept by: {dict(reasons)}")


def _settle(kube: Kube, scenario: Scenario, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not settled(kube, scenario):
        time.sleep(0.5)


def _state(kube: Kube) -> tuple[frozenset[str], frozenset[str]]:
    """The nodes and the Pods' uids: what "nothing changes" compares."""
    nodes = frozenset(n["metadata"]["name"] for n in kube.items(path("nodes")))
    pods = frozenset(p["metadata"]["uid"] for p in kube.items(path("pods"))
                     if not p["metadata"].get("deletionTimestamp"))
    return nodes, pods


def _bounced(evicted: Sequence[tuple[str, str, str]], before: Sequence[PodFact],
             after: Sequence[PodFact]) -> int:
    """Evictions whose Deployment has a new Pod, at the end, on the node the evicted Pod
    left (each new Pod matched once)."""
    app_of = {(p.namespace, p.name): p.app for p in before}
    old = {p.uid for p in before}
    fresh: Counter[tuple[str, str, str]] = Counter(
        (p.namespace, p.app, p.node) for p in after if p.uid not in old and p.node)
    count = 0
    for ns, name, node in evicted:
        app = app_of.get((ns, name)) or name.rsplit("-", 2)[0]
        if node and fresh[(ns, app, node)] > 0:
            fresh[(ns, app, node)] -= 1
            count += 1
    return count


def _median(values: Sequence[float]) -> str:
    if not values:
        return "-"
    m = statistics.median(values)
    spread = f" ({min(values):g}–{max(values):g})" if min(values) != max(values) else ""
    return f"{m:g}{spread}"


def table(results: Sequence[Result]) -> str:
    """Medians over the seeds, with the range, per size and contender."""
    head = ("| nodes | contender | nodes in use before → after | packing around unmovable "
            "Pods | lower bound | evictions | evictions per node removed | came back to the "
            "node they left | protected moved, PDB violations | nodes launched | until nothing "
            "changed (s) |\n" + "|---" * 11 + "|")
    rows = []
    groups: dict[tuple[int, str], list[Result]] = defaultdict(list)
    for r in results:
        groups[(r.nodes, r.contender)].append(r)
    for (n, c), rs in sorted(groups.items(), key=lambda kv: (kv[0][0],
                                                              CONTENDERS.index(kv[0][1]))):
        per = [x for r in rs if (x := r.per_removed) is not None]
        rows.append(
            f"| {n} | {c} | {_median([r.in_use_before for r in rs])} → "
            f"{_median([r.in_use_after for r in rs])} | {_median([r.ffd_around for r in rs])} "
            f"| {_median([r.lower_bound for r in rs])} | {_median([r.evictions for r in rs])} "
            f"| {_median([round(x, 1) for x in per])} | {_median([r.bounced for r in rs])} "
            f"| {_median([r.protected_moved for r in rs])}, "
            f"{_median([r.pdb_violations for r in rs])} | {_median([r.launched for r in rs])} "
            f"| {_median([round(r.seconds) for r in rs])} |")
    return "\n".join([head, *rows])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m localcluster.bench.race", description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[12, 100])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--contenders", nargs="+", choices=CONTENDERS, default=list(CONTENDERS))
    parser.add_argument("--quiet", type=float, default=45.0,
                        help="seconds without a change that end a run")
    parser.add_argument("--max-seconds", type=float, default=900.0)
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results: list[Result] = []
    lines = args.out / "race.jsonl"
    for n in args.nodes:
        for seed in args.seeds:
            for contender in args.contenders:
                workdir = Path(tempfile.mkdtemp(prefix=f"compactor-race-{contender}-"))
                r = race(contender, n, seed, workdir, args.quiet, args.max_seconds,
                         lambda s: print(s, flush=True))
                results.append(r)
                with lines.open("a") as f:
                    f.write(json.dumps(r.__dict__) + "\n")
    text = table(results)
    (args.out / "race.md").write_text(text + "\n")
    print("\n" + text)


if __name__ == "__main__":
    main()
