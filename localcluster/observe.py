"""`python -m localcluster.observe`: the README's dashboard picture, from a real run.

The 6-node compaction of the end-to-end test (webhook registered with the API server,
controller, compaction scheduler, the real descheduler) with a Prometheus scraping the
webhook and the controller; then a few minutes of traffic: managed Deployments scaled up and
down, Pods without a controller (skipped), Pods of a workload no policy covers (unchanged) and
of a ReplicaSet whose intent annotation is unreadable (failed open). Finally every panel of
deploy/grafana/compactor.json is drawn from Prometheus' series to a PNG.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path

from localcluster import Cluster, ClusterConfig, Kube
from localcluster import dashboard as dash
from localcluster.cluster import ROOT
from localcluster.compaction import run
from localcluster.kube import path
from localcluster.prometheus import Prometheus, Target
from localcluster.scenario import small
from localcluster.stack import start_local

OUT = ROOT / "deploy" / "grafana" / "compactor.png"
PAUSE = "registry.k8s.io/pause:3.10"


def _scale(kube: Kube, kind: str, ns: str, name: str, replicas: int) -> None:
    kube.patch(path(kind, ns, name, sub="scale"), {"spec": {"replicas": replicas}})


def _traffic_objects(kube: Kube) -> None:
    kube.ensure_namespace("legacy", default_service_account=True)
    labels = {"app": "legacy"}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{
        "name": "app", "image": PAUSE, "resources": {"requests": {"cpu": "50m"}}}]}}
    kube.create(path("deployments", "legacy"), {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "legacy"},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": template}})
    garbled = {"app": "garbled"}
    kube.create(path("replicasets", "legacy"), {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "garbled", "annotations": {"compactor.dev/intent": "{oops"}},
        "spec": {"replicas": 0, "selector": {"matchLabels": garbled},
                 "template": {**template, "metadata": {"labels": garbled}}}})


def traffic(kube: Kube, minutes: float, period: float = 15.0) -> None:
    """Admissions of every outcome, paced so that a one-minute rate has something to show."""
    sizes = itertools.cycle([(6, 4, 2, 1), (8, 3, 3, 0), (5, 5, 1, 1), (7, 3, 2, 0)])
    deadline = time.monotonic() + minutes * 60
    round_ = 0
    while time.monotonic() < deadline:
        web, worker, legacy, garbled = next(sizes)
        _scale(kube, "deployments", "production", "web", web)
        _scale(kube, "deployments", "batch", "worker", worker)
        _scale(kube, "deployments", "legacy", "legacy", legacy)
        _scale(kube, "replicasets", "legacy", "garbled", garbled)
        kube.create(path("pods", "batch"), {"metadata": {"name": f"bare-{round_}"}, "spec": {
            "containers": [{"name": "c", "image": PAUSE}]}})
        if round_:
            kube.delete(path("pods", "batch", f"bare-{round_ - 1}"))
        round_ += 1
        print(f"  traffic round {round_}: web={web} worker={worker} legacy={legacy}",
              flush=True)
        time.sleep(period)


def observe(cluster: Cluster, workdir: Path, out: Path, minutes: float) -> dict[str, int]:
    kube, stack = start_local(cluster, workdir / "compactor", resync_seconds=5.0)
    assert stack.webhook is not None
    prom = Prometheus(cluster.bin / "prometheus", workdir / "prometheus", [
        Target("compactor-webhook", f"127.0.0.1:{stack.webhook.port}", "https",
               cluster.pki / "ca.crt", "localhost"),
        Target("compactor-controller", f"127.0.0.1:{stack.metrics_port}")], interval=2.0,
        rule_files=[ROOT / "deploy" / "prometheus" / "alerts.yaml"])
    cluster.processes.append(prom.start())
    started = time.time()
    try:
        print("compaction of the end-to-end scenario ...", flush=True)
        outcome = run(cluster, kube, stack, small(), interval=2.0)
        print(f"  {outcome.report.nodes_before} -> {outcome.report.nodes_after} nodes; "
              f"now {minutes:g} minutes of traffic", flush=True)
        _traffic_objects(kube)
        traffic(kube, minutes)
        prom.wait_for_scrapes(2)
        counts = dash.render(prom, dash.load(), out, started, time.time(), step=5.0,
                             rate_interval="1m")
    finally:
        prom.stop()
        kube.close()
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="compactor-observe-"))
    print(f"starting the local cluster in {workdir} ...", flush=True)
    with Cluster(ClusterConfig(workdir=workdir)) as cluster:
        counts = observe(cluster, workdir, args.out, args.minutes)
    empty = [title for title, n in counts.items() if not n]
    print(f"wrote {args.out}: {len(counts)} panels" +
          (f"; without series: {', '.join(empty)}" if empty else ""))


if __name__ == "__main__":
    main()
