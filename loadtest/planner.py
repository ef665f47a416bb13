"""The planner's speed on synthetic clusters of about 30 Pods a node, the demo's mix of
workloads spread as the default scheduler spreads them, plus a few Pods that block their
nodes:

- 100 and 1,000 nodes, one policy over the whole mix;
- 1,000 and 5,000 nodes, 20 policies, each scoped to two namespaces of its own with its
  share of the mix: the workloads share the nodes, every node runs Pods of several policies,
  and the Pods that block are spread over the policies.

Pure code, so timed in-process, in CPU time: the planner runs on one thread and waits for
nothing, so its CPU time is its wall time on an idle core, and it does not count the time
other work on a shared machine keeps it from one. The median of interleaved repeats, with its
spread, of two figures from one call of the pass's ``plan()``:

- the plan: ``drain_memo.reuse_or_choose`` with nothing to reuse, which simulates the drains
  of every policy at once and digests its inputs for the next pass. Targets: under 50 ms at
  100 nodes and under 1 s at 1,000 with one policy; under 300 ms at 1,000 nodes and under
  2 s at 5,000 with 20 policies;
- the whole pass's ``plan()`` around it (membership, labels, the drain plan, own objects,
  status): its first pass, every Pod still to be labelled, is the worst one. Shown, not judged.

Each cluster is built once; before it is timed, its first plan is checked to give every node
and Pod a real verdict (``verdicts``): nodes are freed, each node is judged once, every Pod
of a freed node is placed where it fits, and only the Pods built to block do. The clusters
also hold what costs the scheduler-faithful simulation most: a foreign PreferNoSchedule taint
on every ninth node, a placeholder on every tenth and a Terminating StatefulSet Pod on every
twenty-fifth.

Absolute times do not travel between machines, so ``make bench`` is gated on ratios measured
in one run, on the same clusters:

- the 20-policy plan against the single-policy plan at 1,000 nodes: at most 1.5;
- this planner against the one before it simulated the compaction scheduler's choice
  (``BASELINE``, a ``git worktree`` of that commit), run in turns in child processes on the
  same pickled clusters: at most 1.2, per case.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compaction import names
from compaction.quantity import add
from compaction.safety import Hold
from compaction.workload import WorkloadType
from controller.components.pod_settings import RuntimeSettings
from controller.drain_planner import memo as drain_memo
from controller.drain_planner.drain_plan import DrainPlan
from controller.plan.decide import plan
from controller.plan.settings import PlanSettings
from controller.snapshot.constraints import Taint, parse_constraints
from controller.snapshot.node import NodeInfo
from controller.snapshot.owner import OwnerInfo
from controller.snapshot.pod import PodInfo
from controller.snapshot.policies import parse_policy_info
from controller.snapshot.snapshot import Snapshot
from controller.snapshot.workload import WorkloadInfo, parse_workload

GI = 2**30 * 1000
# (namespace, name, replicas per 100 nodes, cpu millicores, memory MiB), as bench-e2e's mix.
MIX = (("production", "web", 1000, 50, 128), ("production", "api", 700, 100, 256),
       ("production", "cache", 100, 250, 512), ("batch", "worker", 700, 100, 256),
       ("batch", "report", 400, 50, 128))
NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Case:
    nodes: int
    policies: int
    target: float  # seconds: the drain plan's median must stay under it


CASES = (Case(100, 1, 0.05), Case(1000, 1, 1.0), Case(1000, 20, 0.3), Case(5000, 20, 2.0))
# The commit before the planner judged destinations as the compaction scheduler does.
BASELINE = "c4b9694844841d7abe54990cae351272d89ba0a6"
POLICIES_RATIO = 1.5  # 20 policies / 1 policy, at 1,000 nodes
BASELINE_RATIO = 1.2  # this planner / BASELINE's, per case
FOREIGN = Taint("dedicated", "batch", "PreferNoSchedule")


# What the API server's DefaultTolerationSeconds plugin gives every Pod.
DEFAULT_TOLERATIONS = parse_constraints({"tolerations": [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300}]})


def namespace(mixed: str, policy: int, policies: int) -> str:
    """Where the mix's namespace ``mixed`` is for policy ``policy``: itself with one policy,
    a namespace of that policy's own with several."""
    return mixed if policies == 1 else f"t{policy:02d}-{mixed}"


def cluster(nodes: int, policies: int = 1) -> Snapshot:
    """``nodes`` nodes of 4 CPU, 16 GiB and 110 Pods, the mix spread round-robin, a node
    agent on each node, and one pinned (safe-to-evict false) Pod per 10 nodes; every Pod
    with the default tolerations, as a real one has.

    With several ``policies`` each has its own namespaces and an equal share of every
    workload of the mix, spread one policy after the other: every node runs Pods of about
    ten policies, and the pinned Pods go to the policies in turn."""
    node_names = [f"node-{i:04d}" for i in range(nodes)]
    infos = tuple(NodeInfo(n, {"kubernetes.io/hostname": n}, {
        "cpu": 4000_000, "memory": 16 * GI, "pods": 110_000},
        (FOREIGN,) if i % 9 == 4 else ()) for i, n in enumerate(node_names))
    workloads: list[WorkloadInfo] = []
    owners: list[OwnerInfo] = []
    pods: list[PodInfo] = []
    for mixed, app, per_100, _, _ in MIX:
        for k in range(policies):
            ns = namespace(mixed, k, policies)
            w = parse_workload(WorkloadType.DEPLOYMENT, {"metadata": {
                "namespace": ns, "name": app, "uid": f"uid-{app}" if policies == 1 else
                f"uid-{ns}-{app}"}, "spec": {"replicas": per_100 * nodes // 100 // policies}},
                {})
            assert w is not None
            workloads.append(w)
            owners.append(OwnerInfo("ReplicaSet", ns, f"{app}-1", ("Deployment", app), {}))
    at = 0
    for mixed, app, per_100, cpu, mib in MIX:
        requests = {"cpu": cpu * 1000, "memory": mib * 2**20 * 1000}
        for k in range(policies):
            for i in range(per_100 * nodes // 100 // policies):
                pods.append(PodInfo(namespace(mixed, k, policies), f"{app}-{i}", f"{app}-{i}",
                                    {"app": app}, {}, ("ReplicaSet", f"{app}-1"),
                                    node_name=node_names[at % nodes], phase="Running",
                                    ready=True, requests=requests,
                                    constraints=DEFAULT_TOLERATIONS))
                at += 1
    for i, n in enumerate(node_names):
        pods.append(PodInfo(namespace("production", 0, policies), f"agent-{i}", f"agent-{i}",
                            {}, {}, ("DaemonSet", "agent"), node_name=n, phase="Running",
                            ready=True, requests={"cpu": 50_000, "memory": 64 * 2**20 * 1000}))
        if i % 10 == 5:
            pods.append(PodInfo("headroom", f"placeholder-{i}", f"placeholder-{i}", {}, {},
                                ("ReplicaSet", "placeholder-1"), node_name=n, phase="Running",
                                ready=True, priority=-10,
                                requests={"cpu": 100_000, "memory": 128 * 2**20 * 1000}))
        if i % 25 == 12:
            pods.append(PodInfo(namespace("production", 0, policies), f"cache-old-{i}",
                                f"cache-old-{i}", {}, {}, ("StatefulSet", "cache-old"),
                                node_name=n, phase="Running", ready=True, deleting=True,
                                requests={"cpu": 250_000, "memory": 512 * 2**20 * 1000}))
        if i % 10 == 0:
            pods.append(PodInfo(
                namespace("production", i // 10 % policies, policies), f"pinned-{i}",
                f"pinned-{i}", {}, {names.SAFE_TO_EVICT_ANNOTATION: "false"},
                ("ReplicaSet", "web-1"), node_name=n, phase="Running", ready=True,
                requests={"cpu": 100_000, "memory": 128 * 2**20 * 1000}))
    objects = tuple(parse_policy_info({
        "apiVersion": names.API_VERSION, "kind": names.POLICY_KIND,
        "metadata": {"name": "bench" if policies == 1 else f"bench-{k:02d}", "uid": f"u{k}",
                     "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"scope": {"namespaceSelector": {"operator": "In", "values": [
                     namespace("production", k, policies), namespace("batch", k, policies)]}},
                 "descheduler": {"highNodeUtilization": {
                     "thresholds": {"cpu": 65, "memory": 65, "pods": 65}}}}})
        for k in range(policies))
    return Snapshot(policies=objects, nodes=infos, workloads=tuple(workloads),
                    owners=tuple(owners), pods=tuple(pods), cluster_version="v1.36.3")


def verdicts(snapshot: Snapshot, drains: Sequence[DrainPlan]) -> list[str]:
    """What is wrong with the plan of a cluster ``cluster`` builds, checked as the unit tests
    check small ones; empty when every node and Pod got a real verdict: at least a third of
    the nodes freeable, every policy freeing some and a drain starting; each node freeable or
    unremovable, never both, none left out; every Pod of a freeable node but its node agent
    placed on a node that stays, within what that node allocates; the nodes of the pinned
    Pods, and only those, held by a Pod, and no other reason than those and being a
    destination or having a Pod that fits nowhere else, so that every other Pod was judged
    movable under its own policy."""
    problems: list[str] = []
    if len(drains) != len(snapshot.policies):
        problems.append(f"{len(drains)} plans for {len(snapshot.policies)} policies")
    freed = {n for d in drains for n in d.freeable}
    held = {u.node for d in drains for u in d.unremovable}
    nodes = {n.name: n for n in snapshot.nodes}
    if len(freed) * 3 < len(nodes):
        problems.append(f"only {len(freed)} of {len(nodes)} nodes freeable")
    problems += [f"policy {d.policy} frees no node" for d in drains if not d.freeable]
    if not any(d.draining for d in drains):
        problems.append("no drain starts")
    if both := freed & held:
        problems.append(f"{len(both)} nodes both freeable and unremovable")
    if unjudged := set(nodes) - freed - held:
        problems.append(f"{len(unjudged)} nodes without a verdict, e.g. {min(unjudged)}")
    moves: dict[tuple[str, str], str] = {}
    for d in drains:
        moves.update(d.moves)
    # Node agents leave with their node, Terminating Pods by themselves.
    agent = {p.key for p in snapshot.pods
             if p.owner is not None and p.owner[0] == "DaemonSet" or p.deleting}
    on_freed = {p.key for p in snapshot.pods if p.node_name in freed and p.key not in agent}
    if on_freed != set(moves):
        problems.append(f"{len(on_freed - set(moves))} Pods of freeable nodes unplaced, "
                        f"{len(set(moves) - on_freed)} placed from elsewhere")
    load: dict[str, Mapping[str, int]] = {n: {} for n in nodes}
    for p in snapshot.pods:
        if p.key in agent and p.node_name in freed:
            continue  # leaves with its node
        where = moves.get(p.key, p.node_name)
        if where in freed:
            problems.append(f"pod {p.namespace}/{p.name} left on freeable {where}")
            break
        load[where] = add(load[where], p.requests, {"pods": 1000})
    problems += [f"{name} overcommitted" for name, used in sorted(load.items())
                 if any(a > nodes[name].allocatable[r] for r, a in used.items())][:3]
    reasons = [(u.node, r.code) for d in drains for u in d.unremovable for r in u.reasons]
    pinned = {p.node_name for p in snapshot.pods if p.name.startswith("pinned-")}
    if {n for n, code in reasons if code == Hold.SAFE_TO_EVICT.value} != pinned:
        problems.append("the nodes held by a Pod are not those of the pinned Pods")
    if codes := {code for _, code in reasons} - {
            "destination", "does_not_fit", "attracted", "above_thresholds",
            Hold.SAFE_TO_EVICT.value}:
        problems.append(f"unexpected reasons: {', '.join(sorted(codes))}")
    return problems


def _spread(values: Sequence[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


@dataclass(frozen=True)
class Timing:
    case: Case
    pods: int
    plan: tuple[float, float, float]  # median, min, max of the drain plan (seconds)
    whole: tuple[float, float, float]  # the same of the whole pass's plan()
    freeable: int  # nodes, over every policy's plan

    @property
    def passed(self) -> bool:
        return self.plan[0] < self.case.target


@contextlib.contextmanager
def _timing_the_planner(into: list[float]) -> Iterator[None]:
    """The pass calls ``drain_memo.reuse_or_choose`` once: time that call where it is made."""
    original: Callable[..., Any] = drain_memo.reuse_or_choose

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            into.append(time.process_time() - started)
    drain_memo.reuse_or_choose = timed
    try:
        yield
    finally:
        drain_memo.reuse_or_choose = original


def measure(cases: Sequence[Case] = CASES, repeats: int = 9) -> list[Timing]:
    snapshots = {c: cluster(c.nodes, c.policies) for c in cases}  # built once, reused
    settings = PlanSettings(RuntimeSettings())
    whole: dict[Case, list[float]] = {c: [] for c in cases}
    plans: dict[Case, list[float]] = {c: [] for c in cases}
    freeable: dict[Case, int] = {}
    for _ in range(repeats):  # interleaved: A B A B ..., so drift hits all alike
        for c in cases:
            with _timing_the_planner(plans[c]):
                started = time.process_time()
                result = plan(snapshots[c], settings, NOW)  # an empty memory: nothing reused
                whole[c].append(time.process_time() - started)
            if c not in freeable:
                if problems := verdicts(snapshots[c], result.drains):
                    raise SystemExit(f"{c.nodes} nodes, {c.policies} policies: "
                                     + "; ".join(problems))
                freeable[c] = len({n for d in result.drains for n in d.freeable})
            del result  # freed here, not inside the next case's timing
    return [Timing(c, len(snapshots[c].pods), _spread(plans[c]), _spread(whole[c]),
                   freeable[c]) for c in cases]


def _ms(figures: tuple[float, float, float]) -> str:
    median, low, high = (f * 1000 for f in figures)
    return f"{median:.0f} ms ({low:.0f} – {high:.0f})"


def table(timings: Sequence[Timing]) -> str:
    rows = ["| nodes | Pods | policies | the plan: median (min – max) | target | | whole pass "
            "plan(): median (min – max) | nodes freeable |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for t in timings:
        rows.append(f"| {t.case.nodes} | {t.pods} | {t.case.policies} | {_ms(t.plan)} | "
                    f"< {t.case.target * 1000:.0f} ms | {'PASS' if t.passed else 'FAIL'} | "
                    f"{_ms(t.whole)} | {t.freeable} |")
    return "\n".join(rows)


def policies_ratio(timings: Sequence[Timing]) -> float:
    """The 20-policy plan's median over the single-policy plan's, at 1,000 nodes."""
    by = {(t.case.nodes, t.case.policies): t.plan[0] for t in timings}
    return by[(1000, 20)] / by[(1000, 1)]


def _label(case: Case) -> str:
    return f"{case.nodes}/{case.policies}"


@contextlib.contextmanager
def _checkout(commit: str) -> Iterator[Path]:
    """A detached ``git worktree`` of ``commit``, removed after."""
    with tempfile.TemporaryDirectory(prefix="compactor-baseline-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet",
                        str(tree), commit], check=True)
        try:
            yield tree
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                            str(tree)], check=True)


def against_baseline(cases: Sequence[Case], rounds: int = 3, repeats: int = 3
                     ) -> dict[str, tuple[float, float, float]]:
    """Per case: this planner's median, ``BASELINE``'s and their ratio, timed in child
    processes that take turns (this, baseline, this, ...) on the same pickled clusters."""
    times: dict[str, dict[str, list[float]]] = {"this": {}, "baseline": {}}
    with tempfile.TemporaryDirectory(prefix="compactor-clusters-") as tmp, \
            _checkout(BASELINE) as tree:
        file = Path(tmp) / "clusters.pickle"
        file.write_bytes(pickle.dumps({_label(c): cluster(c.nodes, c.policies) for c in cases}))
        timer = ROOT / "loadtest" / "plan_timer.py"
        for _ in range(rounds):
            for who, source in (("this", ROOT), ("baseline", tree)):
                printed = subprocess.run(
                    [sys.executable, str(timer), str(file), str(repeats)], check=True,
                    capture_output=True, text=True,
                    env={**os.environ, "PYTHONPATH": str(source)}).stdout
                for label, values in json.loads(printed).items():
                    times[who].setdefault(label, []).extend(values)
    out: dict[str, tuple[float, float, float]] = {}
    for label in times["this"]:
        this = statistics.median(times["this"][label])
        baseline = statistics.median(times["baseline"][label])
        out[label] = (this, baseline, this / baseline)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=3,
                        help="turns of this planner and BASELINE's, each in a fresh process")
    args = parser.parse_args()
    timings = measure(repeats=args.repeats)
    print(table(timings))
    failed = [t for t in timings if not t.passed]
    ratio = policies_ratio(timings)
    print(f"\n20 policies / 1 policy at 1,000 nodes: {ratio:.2f} (at most {POLICIES_RATIO})")
    compared = against_baseline(CASES, args.rounds)
    print(f"\nthis planner / the one before it ({BASELINE[:12]}), medians of "
          f"{args.rounds} turns each, same clusters:")
    print("| nodes/policies | this | before | ratio |\n| --- | --- | --- | --- |")
    for label, (this, before, r) in compared.items():
        print(f"| {label} | {this * 1000:.0f} ms | {before * 1000:.0f} ms | {r:.2f} |")
    slower = {label: r for label, (_, _, r) in compared.items() if r > BASELINE_RATIO}
    if slower:
        print(f"over {BASELINE_RATIO}: {', '.join(f'{k} ({v:.2f})' for k, v in slower.items())}")
    if failed or ratio > POLICIES_RATIO or slower:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
