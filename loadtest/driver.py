"""`make bench`: admission latency and throughput, side by side with the stack's own ceiling.

One run, everything on loopback, bounded in time:
1. baseline and warm, interleaved (A B A B A B): Starlette/uvicorn/TLS answering a fixed
   AdmissionReview (the ceiling), then the Compactor webhook with its owners known; the ratio
   of each pair, judged on the median; then the webhook paced at half its median rate;
2. cold burst — a fresh webhook, 500 Pods of one ReplicaSet at once over 200 connections,
   owners from the real API;
3. through the API server — Pods created via kube-apiserver one at a time, then by 16
   parallel creators with and without the webhook registered (interleaved).
Servers and locust are pinned to different CPUs where ``taskset`` and two CPUs exist.
Writes a table to stdout and loadtest/results/ (CSV, Markdown, latency PNG), then PASS/FAIL.

The run is here; the scenarios are in scenarios.py, what they admit in workload.py, the
targets they are judged by in verdicts.py, the locust swarm in swarm.py, the files written in
report.py.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from compaction import names
from loadtest import report, verdicts, workload
from loadtest.scenarios import Scenarios, owners_rss
from localcluster import Cluster, ClusterConfig
from localcluster.cluster.stack import apply_file

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "loadtest" / "results"


def run(seconds: int, users: int, repeats: int = 3, creations: int = 1000,
        parallel: int = 16) -> int:
    """Every scenario in turn on one local cluster, the report written; 0 when every target
    is met."""
    workdir = Path(tempfile.mkdtemp(prefix="compactor-bench-"))
    RESULTS.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(ClusterConfig(workdir=workdir / "cluster"))
    with cluster:
        # No scheduler: every Pod the runs create stays Pending, with or without the
        # webhook, so the API server does the same work after admission in each.
        cluster.start_controller_manager()
        kube = cluster.client()
        kube.ensure_namespace(names.INSTALL_NAMESPACE)
        apply_file(kube, ROOT / "deploy" / "rbac" / "webhook.yaml")
        ns = "bench"
        kube.ensure_namespace(ns, default_service_account=True)
        owners = workload.create_owners(kube, ns)
        warm_bodies = workload.bodies(ns, owners, 2000, workdir / "warm.jsonl")
        scenarios = Scenarios(cluster, kube, workdir, seconds, users, repeats, creations,
                              parallel)

        print(f"baseline and warm, interleaved {repeats} times ...", flush=True)
        ratios, paced = scenarios.baseline_and_warm(owners, warm_bodies)

        print("cold burst ...", flush=True)
        burst = scenarios.cold_burst(ns, owners[0])

        print("through the API server ...", flush=True)
        through = scenarios.through_apiserver(ns, owners)
        concurrent = scenarios.concurrent_creation(ns, owners)
        kube.close()

    cache_mib, feed_mib = owners_rss("cache"), owners_rss("feed")
    ratio = verdicts.ratio(ratios)
    checks = verdicts.checks(ratio, paced, burst, cache_mib, feed_mib, scenarios.rows,
                             through, concurrent)
    report.write(RESULTS, scenarios.rows, checks, ratio, scenarios.creation_rates)
    return 0 if all(ok for _, ok, _ in checks) else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=20, help="length of each locust run")
    parser.add_argument("--users", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3,
                        help="interleaved baseline/warm pairs and creation runs")
    parser.add_argument("--creations", type=int, default=1000,
                        help="Pods per concurrent creation run")
    parser.add_argument("--parallel", type=int, default=16, help="concurrent creators")
    args = parser.parse_args()
    sys.exit(run(args.seconds, args.users, args.repeats, args.creations, args.parallel))


if __name__ == "__main__":
    main()
