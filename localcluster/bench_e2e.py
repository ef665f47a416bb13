"""`make bench-e2e` (not in CI): Compactor at 100 nodes and about 3,000 Pods.

Reports the controller's time to carry a policy change onto every workload and Pod, the
peak RSS of the controller and webhook processes, and API requests per minute in steady state.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from localcluster import Cluster, ClusterConfig, Kube
from localcluster.kube import path
from localcluster.process import Process
from localcluster.scenario import POLICY, App, Scenario, apply_policy, create, policy_spec
from localcluster.stack import start_local, webhook_metric


def _scale(factor: float) -> Scenario:
    def n(x: int) -> int:
        return max(1, int(x * factor))
    spec = policy_spec(1)
    spec["setLabelsByEviction"] = False  # measure the reconcile, not a compaction
    return Scenario(nodes=n(100), policy_spec=spec, apps=(
        App("production", "web", n(1000), "50m", "128Mi"),
        App("production", "api", n(700), "100m", "256Mi"),
        App("production", "cache", n(100), "250m", "512Mi", kind="StatefulSet"),
        App("batch", "worker", n(700), "100m", "256Mi"),
        App("batch", "report", n(400), "50m", "128Mi"),
    ))


def _peak_rss_mib(proc: Process) -> float:
    for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _labelled(kube: Kube) -> tuple[int, int, int]:
    workloads = labelled = 0
    for kind in ("deployments", "statefulsets"):
        for ns in ("production", "batch"):
            for w in kube.items(path(kind, ns)):
                if w["metadata"]["name"] in ("pinned", "payments"):
                    continue
                workloads += 1
                labelled += (w["metadata"].get("labels") or {}).get(
                    "compactor.dev/policy") == POLICY
    pods = sum(1 for ns in ("production", "batch") for p in kube.items(path("pods", ns))
               if (p["metadata"].get("labels") or {}).get("compactor.dev/policy") == POLICY)
    return workloads, labelled, pods


def _apiserver_requests(kube: Kube) -> float:
    total = 0.0
    for line in kube.raw("/metrics").text.splitlines():
        if line.startswith("apiserver_request_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0, help="1.0 = 100 nodes, ~3,000 Pods")
    parser.add_argument("--steady-seconds", type=float, default=60.0)
    args = parser.parse_args()
    scenario = _scale(args.scale)
    pods_total = sum(a.replicas for a in scenario.apps)
    workdir = Path(tempfile.mkdtemp(prefix="compactor-bench-e2e-"))
    with Cluster(ClusterConfig(workdir=workdir, start_timeout=300)) as cluster:
        kube, stack = start_local(cluster, workdir / "compactor", resync_seconds=30,
                                        webhook_cache_ttl=30, grace_seconds=35)
        t = time.monotonic()
        print(f"creating {scenario.nodes} nodes and {pods_total} managed Pods ...", flush=True)
        create(cluster, kube, scenario)
        print(f"  cluster populated in {time.monotonic() - t:.0f} s", flush=True)
        time.sleep(5)
        t0 = time.monotonic()
        apply_policy(kube, scenario)
        workloads_done = pods_done = None
        while pods_done is None and time.monotonic() - t0 < 900:
            workloads, labelled, pods = _labelled(kube)
            if workloads_done is None and labelled == workloads:
                workloads_done = time.monotonic() - t0
            if pods >= pods_total:
                pods_done = time.monotonic() - t0
            time.sleep(1)
        controller = cluster.process("compactor-controller")
        assert stack.webhook is not None
        hook, webhook = stack.webhook, stack.webhook.process
        c0 = stack.controller_metric("compactor_controller_api_requests")
        w0 = webhook_metric(hook, "compactor_owner_api_requests_total")
        a0 = _apiserver_requests(kube)
        time.sleep(args.steady_seconds)
        per_min = 60.0 / args.steady_seconds
        c1 = stack.controller_metric("compactor_controller_api_requests")
        w1 = webhook_metric(hook, "compactor_owner_api_requests_total")
        a1 = _apiserver_requests(kube)
        passes = stack.controller_metric("compactor_reconcile_duration_seconds_count")
        total = stack.controller_metric("compactor_reconcile_duration_seconds_sum")
        rows = [
            ("nodes / managed Pods", f"{scenario.nodes} / {pods_total}"),
            ("policy change → every workload labelled", f"{workloads_done or float('nan'):.1f} s"),
            ("policy change → every Pod labelled in place", f"{pods_done or float('nan'):.1f} s"),
            ("mean reconcile pass", f"{total / passes if passes else float('nan'):.2f} s"),
            ("controller peak RSS", f"{_peak_rss_mib(controller):.0f} MiB"),
            ("webhook peak RSS", f"{_peak_rss_mib(webhook):.0f} MiB"),
            ("steady state: controller API requests/min", f"{(c1 - c0) * per_min:.0f}"),
            ("steady state: webhook API requests/min", f"{(w1 - w0) * per_min:.0f}"),
            ("steady state: all API server requests/min", f"{(a1 - a0) * per_min:.0f}"),
        ]
        width = max(len(k) for k, _ in rows)
        print("\n".join(f"  {k:<{width}}  {v}" for k, v in rows))
        kube.close()


if __name__ == "__main__":
    main()
