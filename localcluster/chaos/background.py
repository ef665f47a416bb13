"""The chaos run's background threads: who holds the controller's Lease, the descheduler run
as its CronJob would, and a kubelet's restart of a process that exits."""

from __future__ import annotations

import threading
import time

import httpx

from compaction import names
from localcluster.chaos.reliability import DeschedulerRun
from localcluster.cluster.kube import ApiError, Kube, path
from localcluster.cluster.process import Process
from localcluster.cluster.stack import CompactorStack


class LeaseWatch:
    """Who holds the controller's Lease, polled on a thread: (time, holder) at each change."""

    def __init__(self, kube: Kube, namespace: str = names.INSTALL_NAMESPACE) -> None:
        self.kube, self.namespace = kube, namespace
        self.holders: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-watch", daemon=True)

    def start(self) -> LeaseWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.kube.close()

    def holder(self) -> str:
        return self.holders[-1][1] if self.holders else ""

    def _run(self) -> None:
        url = path("leases", self.namespace, "compactor-controller")
        while not self._stop.wait(0.2):
            try:
                holder = str(self.kube.get(url)["spec"].get("holderIdentity") or "")
            except (ApiError, httpx.HTTPError, OSError, KeyError):
                continue
            if holder != self.holder():
                self.holders.append((time.time(), holder))


class Restarter:
    """Starts a process again when it exits, as the kubelet restarts a container: for the
    compaction scheduler, which exits by design when it cannot renew its Lease in time."""

    def __init__(self, processes: list[Process]) -> None:
        self.processes = processes
        self.restarts: list[tuple[float, str]] = []
        self.held: set[str] = set()  # names of processes a fault keeps down on purpose
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="restarter", daemon=True)

    def start(self) -> Restarter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            for proc in self.processes:
                if proc.name not in self.held and not proc.running():
                    proc.start()
                    self.restarts.append((time.time(), proc.name))


class DeschedulerLoop:
    """The policy's descheduler run every ``interval`` as its CronJob would, on a thread."""

    def __init__(self, stack: CompactorStack, policy: str, interval: float) -> None:
        self.stack, self.policy, self.interval = stack, policy, interval
        self.runs: list[DeschedulerRun] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="descheduler", daemon=True)

    def start(self) -> DeschedulerLoop:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(330)
        self.stack.kube.close()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            started = time.time()
            try:
                run = self.stack.run_descheduler(self.policy)
            except (RuntimeError, ApiError, httpx.HTTPError, OSError):
                self.failures += 1  # the API server down: the CronJob's Job would fail too
                continue
            self.runs.append(DeschedulerRun(started, time.time(), tuple(run.evicted)))
