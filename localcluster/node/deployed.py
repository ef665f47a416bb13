"""Compactor as its users deploy it, on the real node: deploy/ applied with kustomize, only the
image set (``localcluster.node.install``). The webhook and the controller run from Compactor's
image, and so do the Pods the controller creates (the compaction scheduler's Deployment, each
policy's descheduler CronJob).

``DeployedStack`` is what a compaction run asks of Compactor when every part is a Pod: the
compaction scheduler is there once its Deployment is available, and a descheduler run is the
next Job its CronJob starts, read from that Job's Pod log.
"""

from __future__ import annotations

import datetime
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from compaction import names
from localcluster.cluster import scrape
from localcluster.cluster.control_plane import Cluster
from localcluster.cluster.kube import Kube, path, wait_for
from localcluster.cluster.stack import DeschedulerRun, evicted_pods
from localcluster.node import install as kustomize_install

NAMESPACE = names.INSTALL_NAMESPACE
WEBHOOK = "compactor-webhook"
SCHEDULER = "compactor-scheduler"
METRICS_PORT, WEBHOOK_PORT = 8080, 8443


def install(cluster: Cluster, image: str, workdir: Path) -> Path:
    """deploy/ with only the image set, applied as a user applies it (``install``); returns the
    kustomization's directory, for ``install.uninstall``."""
    directory = kustomize_install.kustomization(image, workdir)
    kustomize_install.apply(cluster, directory)
    return directory


def _metrics(url: str) -> str:
    return httpx.get(url, verify=False, timeout=5).text


def webhook_metric(kube: Kube, name: str, **labels: str) -> float:
    """The series of ``name`` summed over the webhook's Pods, read at their own addresses."""
    return sum(scrape.sample(_metrics(f"https://{p['status']['podIP']}:{WEBHOOK_PORT}/metrics"),
                             name, labels)
               for p in kustomize_install.component_pods(kube, "webhook")
               if p["status"].get("podIP"))


@dataclass(frozen=True)
class Installed:
    """What the install took: each Pod's start to Ready, and the install to the first
    admission the API server sent through the webhook's Service."""

    pods_to_ready: dict[str, float]
    seconds_to_admission: float


def wait_installed(kube: Kube, timeout: float = 300.0) -> Installed:
    """Both webhook replicas Ready through their probes, both controller replicas available,
    the webhook configuration given its CA by the controller, and the API server calling the
    webhook through its Service (probe Pods in a namespace of their own, until the webhook
    counts one)."""
    started = time.monotonic()
    kustomize_install.wait_available(kube, timeout)
    wait_for("the webhook configuration's caBundle", lambda: all(
        w.get("clientConfig", {}).get("caBundle") for w in kube.get(
            path("mutatingwebhookconfigurations", name=WEBHOOK))["webhooks"]),
        timeout=timeout, interval=1.0)
    probe_ns = f"probe-{uuid.uuid4().hex[:6]}"
    kube.ensure_namespace(probe_ns, default_service_account=True)

    def called() -> bool:
        # Bare Pods (the webhook skips them) that no node selects: they stay Pending.
        kube.create(path("pods", probe_ns), {"metadata": {"generateName": "probe-"}, "spec": {
            "nodeSelector": {"compactor.dev/probe": "none"},
            "containers": [{"name": "c", "image": "p"}]}})
        return webhook_metric(kube, "compactor_admission_requests_total",
                              outcome="skipped") > 0
    try:
        wait_for("the API server to call the webhook through its Service", called,
                 timeout=timeout, interval=1.0)
    finally:
        kube.delete(path("namespaces", name=probe_ns))
    pods = {p["metadata"]["name"]: kustomize_install.seconds_to_ready(p)
            for c in ("webhook", "controller")
            for p in kustomize_install.component_pods(kube, c)}
    return Installed({k: v for k, v in pods.items() if v is not None},
                     time.monotonic() - started)


@dataclass(frozen=True)
class JobRun:
    """One descheduler Job's Pod: when it started and finished, and what it evicted."""

    pod: str
    created: datetime.datetime
    finished: datetime.datetime | None
    evicted: int


class DeployedStack:
    """Compactor's parts as Pods on the real node, for ``compaction_run.run``: nothing runs
    here but reads of the cluster (Deployments, Job Pods and their logs, metrics)."""

    def __init__(self, kube: Kube, workdir: Path, job_timeout: float = 240.0) -> None:
        self.kube, self.dir, self.job_timeout = kube, workdir, job_timeout
        self.dir.mkdir(parents=True, exist_ok=True)
        self.seen: set[str] = set()  # descheduler Job Pods already read
        self.jobs: list[JobRun] = []
        self.scheduler_seconds: float | None = None  # the policy to its Deployment available

    def start_scheduler(self, timeout: float = 300.0) -> float:
        """Until the compaction scheduler's Deployment (the controller creates it for the
        policy) has an available replica; returns how long that took."""
        started = time.monotonic()
        wait_for("the compaction scheduler's Deployment available",
                 lambda: kustomize_install.available(self.kube, SCHEDULER, 1) is not None,
                 timeout=timeout, interval=0.5)
        self.scheduler_seconds = time.monotonic() - started
        return self.scheduler_seconds

    def _finished_job_pod(self, policy: str) -> dict[str, Any] | None:
        selector = (f"{names.POLICY_LABEL}={policy},"
                    "app.kubernetes.io/component=descheduler")
        done = [p for p in self.kube.items(path("pods", NAMESPACE), selector)
                if p["metadata"]["uid"] not in self.seen
                and p["status"].get("phase") in ("Succeeded", "Failed")]
        done.sort(key=lambda p: p["metadata"]["creationTimestamp"])
        return done[0] if done else None

    def run_descheduler(self, policy: str) -> DeschedulerRun:
        """The next run of the policy's CronJob that this stack has not read: waits for its
        Job's Pod to finish, then reads its log (the Job's Pod stays until the CronJob's
        history limit removes it, one schedule later)."""
        pod = wait_for(f"a finished descheduler Job of {policy}",
                       lambda: self._finished_job_pod(policy), timeout=self.job_timeout,
                       interval=1.0)
        meta = pod["metadata"]
        self.seen.add(meta["uid"])
        log = self.kube.raw(path("pods", NAMESPACE, meta["name"], sub="log")).text
        with (self.dir / "descheduler.log").open("a") as f:
            f.write(f"--- {meta['name']}\n{log}")
        if pod["status"]["phase"] == "Failed":
            raise RuntimeError(f"descheduler Job Pod {meta['name']} failed:\n{log[-3000:]}")
        evicted = evicted_pods(log)
        ended = [s.get("state", {}).get("terminated", {}).get("finishedAt")
                 for s in pod["status"].get("containerStatuses") or []]
        stamp = kustomize_install.timestamp
        self.jobs.append(JobRun(meta["name"], stamp(meta["creationTimestamp"]),
                                stamp(ended[0]) if ended and ended[0] else None, len(evicted)))
        return DeschedulerRun(evicted, log)

    def controller_metric(self, name: str, **labels: str) -> float:
        """``name`` summed over the controller's replicas (the standby counts nothing)."""
        return sum(scrape.sample(_metrics(f"http://{p['status']['podIP']}:{METRICS_PORT}"
                                          "/metrics"), name, labels)
                   for p in kustomize_install.component_pods(self.kube, "controller")
                   if p["status"].get("podIP"))
