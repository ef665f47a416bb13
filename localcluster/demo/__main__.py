"""`make demo`: compaction on an embedded cluster, measured, then left up until Ctrl-C.

12 kwok nodes spread by the default scheduler, a few things that must never move, then a
ClusterCompactionPolicy. Compactor's webhook, controller and compaction scheduler run as
processes; the descheduler runs the way its CronJob would, on a short interval. With
``--autoscaler karpenter`` the nodes come from a Karpenter NodePool (WhenEmpty), which removes
the nodes the compaction empties.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from localcluster import Cluster, ClusterConfig
from localcluster.cluster.karpenter import Karpenter
from localcluster.cluster.kube import Kube
from localcluster.cluster.stack import start_local
from localcluster.demo import real_node
from localcluster.demo.compaction_run import Outcome, run
from localcluster.demo.measure import (
    cpu_millis,
    disruption_table,
    forecast_table,
    plot,
    removal_table,
    repeats_table,
)
from localcluster.demo.nodepool import NodePool
from localcluster.demo.scenario import PROTECTED, Scenario, small, spread_overrides, standard


@contextlib.contextmanager
def node_pool(autoscaler: str, cluster: Cluster, kube: Kube, scenario: Scenario
              ) -> Iterator[NodePool | None]:
    """Karpenter running with the scenario's NodePool (not consolidating yet), or nothing."""
    if autoscaler != "karpenter":
        yield None
        return
    with Karpenter(cluster, scenario.shape) as karpenter:
        karpenter.install(kube)
        karpenter.start()
        yield NodePool(karpenter)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m localcluster.demo", description=__doc__)
    parser.add_argument("--small", action="store_true", help="the 6-node scenario of the tests")
    parser.add_argument("--no-wait", action="store_true", help="stop after the report")
    parser.add_argument("--spread", action="store_true",
                        help="setLabelsByEviction: false and thresholds at 100 %%: nothing "
                             "re-admits the spread Pods, the plan alone compacts")
    parser.add_argument("--by-eviction", action="store_true",
                        help="setLabelsByEviction: true: the runtime hook re-admits the Pods "
                             "placed before the policy onto the compaction scheduler (by "
                             "default false: the plan's drains alone compact)")
    parser.add_argument("--autoscaler", choices=("none", "karpenter"), default="none",
                        help="karpenter: the nodes come from a NodePool (Karpenter's kwok "
                             "provider, built by tools/build-karpenter.sh), which removes the "
                             "nodes the compaction empties")
    parser.add_argument("--real-node", action="store_true",
                        help="every Compactor part from its image on a real node (kubelet, "
                             "containerd), installed from deploy/ with kustomize, in a network "
                             "namespace of its own (root; builds the node and the images)")
    parser.add_argument("--out", type=Path, default=Path("demo-out"))
    parser.add_argument("--repeat", type=int, default=0, metavar="N",
                        help="run N times, each on a fresh cluster, print the runs side by "
                             "side and exit")
    args = parser.parse_args()
    if args.real_node:
        sys.exit(real_node.main(args, sys.argv[1:]))
    if args.repeat:
        repeat(args.repeat, args.small, args.spread, args.out, args.autoscaler,
               args.by_eviction)
        return
    scenario = small(args.by_eviction) if args.small else standard(args.by_eviction)
    args.out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="compactor-demo-"))
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    print(f"starting the local cluster in {workdir} ...", flush=True)
    with Cluster(ClusterConfig(workdir=workdir)) as cluster:
        kube, stack = start_local(cluster, workdir / "compactor")
        pool_ = contextlib.ExitStack()
        pool = pool_.enter_context(node_pool(args.autoscaler, cluster, kube, scenario))
        print(f"creating {scenario.nodes} nodes"
              f"{' (a Karpenter NodePool)' if pool else ''} and the workloads; protected: "
              f"{', '.join(f'{ns}/{n} ({why})' for (ns, n), why in PROTECTED.items())}",
              flush=True)
        print("applying the policy; descheduler runs:", flush=True)
        overrides = spread_overrides(scenario) if args.spread else {}
        outcome = run(cluster, kube, stack, scenario, interval=1.0, log=True, pool=pool,
                      **overrides)
        print("\nCompaction report\n" + outcome.report.table())
        png = plot(outcome.cpu_before, outcome.cpu_after, cpu_millis(scenario.shape.cpu),
                   args.out / "requested-cpu-per-node.png")
        (args.out / "report.txt").write_text(outcome.report.table() + "\n")
        print(f"\nper-node requested CPU: {png}")
        print(f"\ncluster is up: {cluster.server}")
        print(f"  export KUBECONFIG={cluster.kubeconfig}")
        print("  kubectl get clustercompactionpolicies; kubectl get pods -A -o wide")
        print(f"  logs: {workdir / 'logs'} and {workdir / 'compactor'}")
        if not args.no_wait:
            print("press Ctrl-C to stop", flush=True)
            stop.wait()
        pool_.close()
        kube.close()
    print("stopped")


def forecast_nodes(outcome: Outcome) -> str:
    """The nodes the forecast keeps beside the nodes the run ended using, where they differ."""
    freeable = {f["node"] for f in outcome.forecast.get("freeable", [])}
    kept = set(outcome.forecast.get("nodesInUse", [])) - freeable
    reached = {p.node for p in outcome.after if p.node and p.stays}
    if kept == reached:
        return "  forecast kept the nodes the run kept"
    why = sorted(f"{p.node}: {p.namespace}/{p.app}" for p in outcome.after
                 if p.node in reached ^ kept and p.app != "node-agent")
    return (f"  forecast kept but the run freed: {sorted(kept - reached)}; run kept but the "
            f"forecast freed: {sorted(reached - kept)} (their Pods after: {why})")


def repeat(times: int, small_scenario: bool, spread: bool, out: Path,
           autoscaler: str = "none", by_eviction: bool = False) -> None:
    """The same run ``times`` times on fresh clusters: how often each target is met."""
    reports = []
    for i in range(1, times + 1):
        scenario = small(by_eviction) if small_scenario else standard(by_eviction)
        overrides = spread_overrides(scenario) if spread else {}
        workdir = Path(tempfile.mkdtemp(prefix="compactor-demo-"))
        with Cluster(ClusterConfig(workdir=workdir)) as cluster:
            kube, stack = start_local(cluster, workdir / "compactor")
            with node_pool(autoscaler, cluster, kube, scenario) as pool:
                outcome = run(cluster, kube, stack, scenario, interval=1.0, pool=pool,
                              **overrides)
            reports.append(outcome.report)
            kube.close()
        print(forecast_nodes(outcome), flush=True)
        print(f"run {i}: {reports[-1].nodes_after} nodes after, nodes in use after "
              f"{reports[-1].in_use_after}, {reports[-1].kept_after} counted as the forecast "
              f"counts ({reports[-1].predicted_after}), "
              f"{reports[-1].futile_evictions} futile evictions; "
              f"{reports[-1].evictions} evictions by any actor, came back "
              f"{reports[-1].came_back_text()}, per net node removed "
              f"{reports[-1].per_net_text()}", flush=True)
    table = (repeats_table(reports) + "\n\n" + forecast_table(reports) + "\n\n"
             + disruption_table(reports))
    if autoscaler == "karpenter":
        table += "\n\n" + removal_table(reports)
    out.mkdir(parents=True, exist_ok=True)
    name = (f"repeats{'-by-eviction' if by_eviction else ''}{'-spread' if spread else ''}"
            f"{'-small' if small_scenario else ''}"
            f"{'-karpenter' if autoscaler == 'karpenter' else ''}.md")
    (out / name).write_text(table + "\n")
    (out / name).with_suffix(".json").write_text(
        json.dumps([dataclasses.asdict(r) for r in reports], indent=1) + "\n")
    print("\n" + table)


if __name__ == "__main__":
    main()
