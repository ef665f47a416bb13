"""`make bench`: the whole ``kubectl compactor plan`` on a large cluster, its wall time and
peak memory.

The local cluster's kwok with 5,000 nodes and about 150,000 Pods (``loadtest.kwok_cluster``:
the planner benchmark's mix, every Pod bound and Running), then the installed plugin run as
a subprocess, as an admin runs it: ``kubectl-compactor plan -f policy.yaml -o json`` with one
policy over the mix's namespaces. It lists nodes, Pods, budgets, namespaces and the owning
workloads page by page from the API server, plans with the controller's planner and prints
the report. Each run's wall time (start to exit) and peak RSS (``wait4``'s ``ru_maxrss`` of
that one child) are measured; targets: under 20 s and under 1 GiB, judged on the median time
and the largest RSS. The report is checked to judge every node.

Each run is paired with one of the same plugin with ``--no-counterfactual``, interleaved, so
that what the counterfactual (what would free more: the first few levers planned again) adds
is measured in the same run: at most 50 % of the wall time (the medians), and the RSS of
either under 1 GiB.

``--against DIR`` also runs another checkout's plugin (``python -m kubectl_compactor.cli``
from DIR, e.g. a ``git worktree`` of an earlier commit), interleaved with this one's on the
same cluster, and prints the ratio of their median wall and CPU times.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from compaction import names
from loadtest.kwok_cluster import NAMESPACES, Shape, build
from localcluster import Cluster, ClusterConfig

PLUGIN: Final = str(Path(sys.executable).parent / "kubectl-compactor")
# No compaction of etcd: a list that outlasts its five minutes would lose its continue token.
# The API server keeps its watch cache, as a cluster's does: the Pods written into etcd reach
# it through its watch, and a warm-up run, not timed, waits until it has them.
APISERVER_FLAGS: Final = ("--etcd-compaction-interval=0",)
TARGET_SECONDS: Final = 20.0
TARGET_RSS: Final = 2**30
COUNTERFACTUAL_SHARE: Final = 0.5  # the most the counterfactual may add to the wall time
THRESHOLDS: Final = 65


def bench_policy(thresholds: int = THRESHOLDS) -> dict[str, Any]:
    """The one policy over the mix's namespaces. Lower thresholds hold nodes the plan at 65 %
    frees, so that the counterfactual has a lever to plan again."""
    return {
        "apiVersion": names.API_VERSION, "kind": names.POLICY_KIND,
        "metadata": {"name": "bench"},
        "spec": {"scope": {"namespaceSelector": {"operator": "In", "values": list(NAMESPACES)}},
                 "descheduler": {"highNodeUtilization": {"thresholds": {
                     "cpu": thresholds, "memory": thresholds, "pods": thresholds}}}}}


@dataclass(frozen=True)
class Run:
    seconds: float
    cpu: float  # seconds of CPU, user and system, of the child alone: on a loaded machine,
    # what it would take without waiting for a core
    rss: int  # bytes, the child's peak
    nodes_in_use: int
    freeable: int
    pods_to_move: int
    levers: int = 0  # counterfactual levers planned again (0: skipped, or an older plugin)
    first: str = ""  # the first lever and what it frees more


def plugin_module(source: Path) -> str:
    """The plugin's module in a checkout: a package of its own, or inside the controller in
    checkouts made before it moved out."""
    if (source / "kubectl_compactor" / "cli.py").is_file():
        return "kubectl_compactor.cli"
    return "controller.preview_cli"


def preview(kubeconfig: Path, policy: Path, source: Path | None = None,
            counterfactual: bool = True) -> Run:
    """One run of the plugin as a child of its own, timed and measured by ``wait4``: the
    installed one, or ``source``'s (a checkout's) with this interpreter; without its
    counterfactual when ``counterfactual`` is false."""
    command = [PLUGIN] if source is None else [sys.executable, "-m", plugin_module(source)]
    env = None if source is None else {**os.environ, "PYTHONPATH": str(source)}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        child = subprocess.Popen([*command, "plan", "-f", str(policy), "--kubeconfig",
                                  str(kubeconfig), "-o", "json",
                                  *(() if counterfactual else ("--no-counterfactual",))],
                                 stdout=out, stderr=err,
                                 env=env, cwd=source)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.monotonic() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if child.returncode != 0:
            raise SystemExit(f"the preview failed ({child.returncode}): "
                             f"{err.read().decode()[-2000:]}")
        report: dict[str, Any] = json.loads(out.read())
    ranked = report.get("counterfactual") or ()
    levers = sum(1 for r in ranked if r["planned"])
    first = (f"{ranked[0]['kind']} {ranked[0]['target']}: {ranked[0]['moreNodes']} more "
             f"(estimate {ranked[0]['estimate']})" if ranked else "")
    return Run(seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024,
               len(report["nodesInUse"]), len(report["freeable"]), report["podsToMove"],
               levers, first)


def measure(nodes: int, runs: int, keep: bool, against: Path | None = None,
            thresholds: int = THRESHOLDS) -> tuple[Shape, list[Run], list[Run], list[Run]]:
    """The cluster's shape, and the runs of this plugin, of it without its counterfactual,
    and of ``against``'s, taking turns."""
    workdir = Path(tempfile.mkdtemp(prefix="compactor-bench-preview-"))
    try:
        with Cluster(ClusterConfig(workdir=workdir, start_timeout=300,
                                   apiserver_flags=APISERVER_FLAGS)) as cluster:
            cluster.start_kwok()
            kube = cluster.client()
            print(f"building {nodes:,} kwok nodes and their Pods ...", flush=True)
            shape = build(cluster, kube, nodes)
            print(f"built {shape.nodes:,} nodes and {shape.pods:,} Pods in "
                  f"{shape.seconds:.0f} s", flush=True)
            # From here kwok would only renew 5,000 fake kubelets' heartbeats, which kept the
            # API server at 175 % of this machine's two cores; the nodes stay Ready (no
            # controller manager runs to mark them otherwise).
            kwok = cluster.process("kwok")
            kwok.stop()
            cluster.processes.remove(kwok)
            policy = workdir / "policy.yaml"
            policy.write_text(yaml.safe_dump(bench_policy(thresholds)))
            warm = preview(cluster.kubeconfig, policy)
            print(f"  warm-up: {warm.seconds:.1f} s (not counted)", flush=True)
            done: list[Run] = []
            bare: list[Run] = []
            other: list[Run] = []
            for i in range(runs):
                for runs_of, source, who in ((done, None, "this"),
                                             (bare, None, "--no-counterfactual"),
                                             (other, against, "against")):
                    if who == "against" and source is None:
                        continue
                    runs_of.append(preview(cluster.kubeconfig, policy, source,
                                           who != "--no-counterfactual"))
                    r = runs_of[-1]
                    print(f"  run {i + 1} ({who}): {r.seconds:.1f} s ({r.cpu:.1f} s of CPU), "
                          f"{r.rss / 2**20:.0f} MiB, {r.levers} levers planned again"
                          + (f", first {r.first}" if r.first else ""), flush=True)
            kube.close()
            return shape, done, bare, other
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


def counterfactual_share(runs: Sequence[Run], bare: Sequence[Run]) -> float:
    """What the counterfactual adds to the median wall time, as a share of the preview's
    without it."""
    without = statistics.median(r.seconds for r in bare)
    return statistics.median(r.seconds for r in runs) / without - 1


def verdicts(shape: Shape, runs: Sequence[Run], bare: Sequence[Run] = ()
             ) -> list[tuple[str, bool, str]]:
    median = statistics.median(r.seconds for r in runs)
    rss = max(r.rss for r in (*runs, *bare))
    last = runs[-1]
    return [
        (f"the whole preview under {TARGET_SECONDS:.0f} s (median of {len(runs)})",
         median < TARGET_SECONDS, f"{median:.1f} s"),
        ("its peak RSS under 1 GiB (the largest)", rss < TARGET_RSS, f"{rss / 2**20:.0f} MiB"),
        ("every node judged in use", last.nodes_in_use == shape.nodes,
         f"{last.nodes_in_use} of {shape.nodes}"),
        ("nodes freed", last.freeable > 0, f"{last.freeable}"),
        *([(f"the counterfactual adds at most {COUNTERFACTUAL_SHARE:.0%} to the wall time "
            "(medians, against --no-counterfactual)",
            (share := counterfactual_share(runs, bare)) <= COUNTERFACTUAL_SHARE,
            f"+{share:.0%}, {last.levers} levers planned again")] if bare else []),
    ]


def table(shape: Shape, runs: Sequence[Run]) -> str:
    seconds = [r.seconds for r in runs]
    cpu = [r.cpu for r in runs]
    rss = [r.rss / 2**20 for r in runs]
    return "\n".join([
        "| nodes | Pods | runs | wall time: median (min – max) | CPU time: median "
        "| peak RSS: max (min) | freeable | Pods to move |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {shape.nodes:,} | {shape.pods:,} | {len(runs)} | {statistics.median(seconds):.1f} s "
        f"({min(seconds):.1f} – {max(seconds):.1f}) | {statistics.median(cpu):.1f} s "
        f"| {max(rss):.0f} MiB ({min(rss):.0f}) | {runs[-1].freeable:,} "
        f"| {runs[-1].pods_to_move:,} |"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the cluster's directory")
    parser.add_argument("--against", type=Path, metavar="DIR",
                        help="also run DIR's plugin (a checkout), interleaved, and compare")
    parser.add_argument("--thresholds", type=int, default=THRESHOLDS, metavar="PCT",
                        help=f"the policy's thresholds (default {THRESHOLDS})")
    args = parser.parse_args()
    shape, runs, bare, other = measure(args.nodes, args.runs, args.keep, args.against,
                                       args.thresholds)
    print(table(shape, runs))
    print("--no-counterfactual:")
    print(table(shape, bare))
    if other:
        print(f"against {args.against}:")
        print(table(shape, other))
        for what, key in (("wall", "seconds"), ("CPU", "cpu")):
            ratio = (statistics.median(getattr(r, key) for r in runs)
                     / statistics.median(getattr(r, key) for r in other))
            print(f"median {what} time, this / against: {ratio:.2f}")
    checks = verdicts(shape, runs, bare)
    for what, ok, figure in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {what}: {figure}")
    if not all(ok for _, ok, _ in checks):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
