"""The demo's compaction with every Compactor part running from its image on a real node.

The scenario's kwok nodes carry the harness's taint and its Pods tolerate and select them, so
the real node (containerd and a kubelet) runs Compactor's Pods alone: the webhook and the
controller installed from deploy/ with kustomize, the compaction scheduler's Deployment and
each descheduler CronJob's Job Pods that the controller creates. The descheduler runs only as
those Jobs, on the policy's own schedule (every minute here).
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcluster.cluster.control_plane import ROOT
from localcluster.cluster.kube import Kube, path
from localcluster.demo.compaction_run import Outcome, run
from localcluster.demo.measure import nodes_with, snapshot
from localcluster.demo.scenario import (
    MANAGED_NAMESPACES,
    POLICY,
    Scenario,
    on_kwok,
    standard,
)
from localcluster.node import deployed, install, netns
from localcluster.node.cluster import NodeCluster, NodeConfig
from localcluster.node.deployed import DeployedStack, Installed, JobRun

IMAGES_ENV = "COMPACTOR_IMAGES_DIR"
EVERY_MINUTE = "* * * * *"  # the shortest schedule a CronJob has


def images(directory: Path) -> dict[Path, str]:
    """The archives tools/build-images.sh lists in ``images.txt``, with their tags."""
    rows = [line.split() for line in (directory / "images.txt").read_text().splitlines()
            if line.strip()]
    return {directory / name: tag for name, tag in rows}


def compactor_image(found: dict[Path, str]) -> str:
    (tag,) = [t for t in found.values() if t.rsplit(":", 1)[0].split("/")[-1] == "compactor"]
    return tag


def every_minute(scenario: Scenario) -> dict[str, Any]:
    """The policy overrides of the run: the descheduler's CronJob on ``EVERY_MINUTE``."""
    return {"descheduler": {**scenario.policy_spec["descheduler"], "interval": EVERY_MINUTE}}


class Progress:
    """Nodes carrying managed Pods, sampled every ``period`` from a thread of its own: the
    run reads them once per descheduler Job (a minute apart), too coarse for a time."""

    def __init__(self, kube: Kube, period: float = 2.0) -> None:
        self.kube, self.period = kube, period
        self.samples: list[tuple[datetime.datetime, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="progress", daemon=True)

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            try:
                managed = [p for p in snapshot(self.kube) if p.managed]
            except Exception:  # noqa: BLE001 - a missed sample only coarsens the time
                continue
            self.samples.append((datetime.datetime.now(datetime.UTC), len(nodes_with(managed))))

    def reached(self, nodes: int, since: datetime.datetime) -> float | None:
        """Seconds from ``since`` to the first sample at ``nodes`` from which it stayed there."""
        first = None
        for at, count in self.samples:
            if count == nodes:
                first = first or at
            else:
                first = None
        return (first - since).total_seconds() if first else None


@dataclass(frozen=True)
class RealNodeRun:
    outcome: Outcome
    installed: Installed
    scheduler_seconds: float | None  # the policy to the scheduler Deployment available
    jobs: tuple[JobRun, ...]  # the descheduler's Jobs the run read
    seconds_to_nodes_after: float | None  # the policy to the nodes after, reached for good
    compactor_pods: dict[str, str]  # Compactor's Pods (and Job Pods) after, by node

    def table(self) -> str:
        lines = [
            "  webhook and controller Pods, creation to Ready: " + ", ".join(
                f"{name} {s:.0f} s" for name, s in sorted(self.installed.pods_to_ready.items())),
            f"  install to the first admission through the Service: "
            f"{self.installed.seconds_to_admission:.0f} s",
            "  policy to the compaction scheduler's Deployment available: "
            + ("-" if self.scheduler_seconds is None else f"{self.scheduler_seconds:.0f} s"),
            f"  descheduler Jobs read: {len(self.jobs)}, evictions "
            f"{sum(j.evicted for j in self.jobs)}",
            "  policy to the nodes after: " + ("-" if self.seconds_to_nodes_after is None
                                                else f"{self.seconds_to_nodes_after:.0f} s"),
        ]
        return "\n".join(lines)


def provision_on(node: NodeCluster) -> Any:
    """The scenario's nodes as the harness makes them: kwok nodes with its taint."""
    def provision(_: Kube, scenario: Scenario) -> list[str]:
        node.add_kwok_nodes(scenario.node_names, scenario.shape)
        return scenario.node_names
    return provision


def compact(node: NodeCluster, kube: Kube, image: str, workdir: Path,
            scenario: Scenario | None = None, log: bool = False,
            max_seconds: float = 1500.0) -> tuple[RealNodeRun, Path]:
    """Install Compactor from deploy/ with ``image``, then the scenario (tolerating the kwok
    nodes) and its policy, measured as the demo measures; returns the run and the
    kustomization's directory (``clean_up`` removes both)."""
    directory = deployed.install(node.cluster, image, workdir)
    installed = deployed.wait_installed(kube)
    if log:
        print(f"installed; first admission through the Service "
              f"{installed.seconds_to_admission:.0f} s after the Deployments were applied",
              flush=True)
    stack = DeployedStack(kube, workdir / "compactor")
    scenario = on_kwok(scenario or standard(by_eviction=True))
    sampler = node.client()
    try:
        with Progress(sampler) as progress:
            # A round is one Job, a minute: the demo's patience of 6 rounds (18 while the
            # plan shows a node to free with a movable Pod on it) would be up to 18
            # minutes; 3 rounds is the demo's quiet count.
            outcome = run(node.cluster, kube, stack, scenario, interval=1.0,
                          max_seconds=max_seconds, patience=3, log=log,
                          provision=provision_on(node), **every_minute(scenario))
    finally:
        sampler.close()
    policy = kube.get(scenario.policies[0].path)
    applied = datetime.datetime.fromisoformat(
        policy["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    pods = {f"{p['metadata']['name']}": p["spec"].get("nodeName", "")
            for p in kube.items(path("pods", deployed.NAMESPACE))}
    return RealNodeRun(outcome, installed, stack.scheduler_seconds, tuple(stack.jobs),
                       progress.reached(outcome.report.nodes_after, applied), pods), directory


def clean_up(node: NodeCluster, kube: Kube, scenario: Scenario, directory: Path) -> None:
    """The scenario's objects, its nodes and Compactor itself, so the cluster is as it was."""
    for team in scenario.policies:
        kube.delete(team.path)
    for ns in (*MANAGED_NAMESPACES, "headroom"):
        kube.delete(path("namespaces", name=ns))
    kube.delete(path("deployments", "kube-system", "dns", api="apis/apps/v1"))
    kube.delete(path("priorityclasses", name="overprovisioning",
                     api="apis/scheduling.k8s.io/v1"))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(
            kube.find(path("namespaces", name=ns)) for ns in (*MANAGED_NAMESPACES, "headroom")):
        time.sleep(1.0)
    for name in scenario.node_names:
        kube.delete(path("nodes", name=name))
    install.uninstall(node.cluster, directory)


def _inside(args: argparse.Namespace) -> int:
    where = Path(os.environ[IMAGES_ENV])
    found = images(where)
    workdir = Path(tempfile.mkdtemp(prefix="compactor-real-node-"))
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"starting the real node's cluster in {workdir} ...", flush=True)
    with NodeCluster(NodeConfig(workdir=workdir, images=tuple(found))) as node:
        kube = node.client()
        print(f"installing Compactor ({compactor_image(found)}) with kustomize; then "
              f"{standard().nodes} tainted kwok nodes, the workloads and {POLICY} "
              f"(descheduler CronJob on {EVERY_MINUTE!r}); descheduler Jobs:", flush=True)
        result, _ = compact(node, kube, compactor_image(found), workdir / "install",
                            scenario=standard(args.by_eviction), log=True)
        report = result.outcome.report
        print("\nCompaction report (every Compactor part from its image)\n" + report.table())
        print("\nFrom images\n" + result.table())
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "report-real-node.txt").write_text(
            report.table() + "\n\n" + result.table() + "\n")
        print(f"\ncluster is up inside the network namespace of PID {os.getpid()}: "
              f"nsenter --net=/proc/{os.getpid()}/ns/net kubectl "
              f"--kubeconfig={node.cluster.kubeconfig} get pods -A -o wide")
        kube.close()
        if not args.no_wait:
            print("press Ctrl-C to stop", flush=True)
            stop.wait()
    print("stopped")
    return 0


def main(args: argparse.Namespace, argv: list[str]) -> int:
    """Outside the namespace: build the node and the images (they need the network), then run
    this demo again inside a fresh network namespace; inside it, the run itself."""
    if os.environ.get(netns.OUTER_ENV):
        return _inside(args)
    built = subprocess.run(["bash", str(ROOT / "tools" / "build-images.sh")], check=False,
                           stdout=subprocess.PIPE, text=True)
    if built.returncode != 0:
        print("tools/build-images.sh failed (see its messages above)", file=sys.stderr)
        return built.returncode
    env = {**os.environ, IMAGES_ENV: built.stdout.strip().splitlines()[-1]}
    inner = [sys.executable, "-m", "localcluster.node", "--", sys.executable, "-m",
             "localcluster.demo", *argv]
    return subprocess.run(inner, check=False, env=env).returncode
