"""Pods created all the time: Deployments scaled up and down at random on a thread of their
own, and now and then one rolled out (a new ReplicaSet, whose owner admission must look up)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from localcluster.cluster.kube import ApiError, Credentials, Kube, path


@dataclass(frozen=True)
class Scale:
    at: float  # wall-clock seconds
    workload: str  # namespace/name
    replicas: int


class Churn:
    """Bounded: it stops after ``max_seconds`` even if nobody stops it."""

    def __init__(self, creds: Credentials, workloads: Sequence[str], initial: int,
                 low: int, high: int, interval: float, rollout_every: float,
                 seed: int = 7, max_seconds: float = 1800.0) -> None:
        self.workloads = list(workloads)
        self.low, self.high, self.interval = low, high, interval
        self.rollout_every, self.max_seconds = rollout_every, max_seconds
        self.scales = [Scale(time.time(), w, initial) for w in self.workloads]
        self.rollouts = 0
        self.errors = 0  # requests the API server did not answer (a fault in progress)
        self._rng = random.Random(seed)
        self._kube = Kube(creds, timeout=5)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="churn", daemon=True)

    def start(self) -> Churn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._kube.close()

    def desired(self, workload: str, at: float) -> int:
        """The replicas asked of ``workload`` at ``at`` (the last scale before it)."""
        count = 0
        for s in self.scales:
            if s.workload == workload and s.at <= at:
                count = s.replicas
        return count

    def burst(self) -> str:
        """One workload scaled to ``high`` at once (when a fault needs Pods created while it
        lasts); returns which."""
        workload = min(self.workloads, key=lambda w: self.desired(w, time.time()))
        namespace, name = workload.split("/")
        kube = Kube(self._kube.creds, timeout=5)
        try:
            kube.patch(path("deployments", namespace, name), {"spec": {"replicas": self.high}})
        finally:
            kube.close()
        self.scales.append(Scale(time.time(), workload, self.high))
        return workload

    def _run(self) -> None:
        started = last_rollout = time.monotonic()
        while not self._stop.wait(self.interval):
            if time.monotonic() - started > self.max_seconds:
                return
            workload = self._rng.choice(self.workloads)
            namespace, name = workload.split("/")
            url = path("deployments", namespace, name)
            try:
                if time.monotonic() - last_rollout > self.rollout_every:
                    last_rollout = time.monotonic()
                    self.rollouts += 1
                    self._kube.patch(url, {"spec": {"template": {"metadata": {"annotations": {
                        "chaos.compactor.test/rollout": str(self.rollouts)}}}}})
                    continue
                replicas = self._rng.randint(self.low, self.high)
                self._kube.patch(url, {"spec": {"replicas": replicas}})
                self.scales.append(Scale(time.time(), workload, replicas))
            except (ApiError, httpx.HTTPError, OSError):
                self.errors += 1
