"""How long Pods wait unbound on the compaction scheduler: a sampler for the runs that take
the scheduler away. A Pod's ``schedulerName`` never changes, so one sent to a scheduler that
does not run waits until Compactor replaces it; the figure to watch is the longest wait."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from compaction import names
from localcluster.cluster.kube import ApiError, Kube, path


class Stranding:
    """Samples the Pods of ``namespaces`` twice a second on a thread of its own."""

    def __init__(self, kube: Kube, namespaces: Iterable[str]) -> None:
        self.kube = kube
        self.namespaces = tuple(namespaces)
        self.first_seen: dict[str, float] = {}
        self.longest: dict[str, float] = {}  # Pod uid -> longest wait seen, in seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stranding", daemon=True)

    def __enter__(self) -> Stranding:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            now = time.monotonic()
            for ns in self.namespaces:
                try:
                    pods = self.kube.items(path("pods", ns))
                except ApiError:
                    continue  # an API server restart: the next sample catches up
                for pod in pods:
                    uid, spec = pod["metadata"]["uid"], pod["spec"]
                    if (spec.get("schedulerName") == names.MANAGED_SCHEDULER
                            and not spec.get("nodeName")
                            and not pod["metadata"].get("deletionTimestamp")):
                        start = self.first_seen.setdefault(uid, now)
                        self.longest[uid] = now - start

    def over(self, bound: float) -> dict[str, float]:
        """The Pods that waited longer than ``bound`` seconds."""
        return {uid: s for uid, s in self.longest.items() if s > bound}

    def summary(self, bound: float) -> str:
        worst = max(self.longest.values(), default=0.0)
        return (f"{len(self.longest)} Pods waited on {names.MANAGED_SCHEDULER}, the longest "
                f"{worst:.1f} s; {len(self.over(bound))} past the bound of {bound:.0f} s")
