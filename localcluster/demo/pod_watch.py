"""A thread that lists, then watches, every Pod of a run into a ``PodLog``: evictions are seen
on the watch however briefly their Pod lived, which a run's snapshots between descheduler runs
can miss."""

from __future__ import annotations

import threading

import httpx

from localcluster.cluster.kube import ApiError, Kube, path
from localcluster.demo.evictions import PodLog


class PodWatch:
    """After a broken watch it resumes from the last version seen; after a 410 it lists again,
    and what changed in between is lost (counted in ``relists``)."""

    def __init__(self, kube: Kube) -> None:
        self._kube = Kube(kube.creds, timeout=10)
        self._log = PodLog()
        self._seq = 0
        self.relists = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="pod-watch", daemon=True)
        self._version = ""
        self._listed = False

    def start(self) -> PodWatch:
        self._version = self._list()
        self._thread.start()
        return self

    def stop(self) -> PodLog:
        self._stop.set()
        self._thread.join(30)
        self._kube.close()
        return self.log

    @property
    def log(self) -> PodLog:
        with self._lock:
            return self._log

    def _note(self, obj: dict[str, object], seq: int | None = None) -> None:
        with self._lock:
            if seq is None:
                self._seq += 1
            self._log = self._log.seen(obj, self._seq if seq is None else seq)

    def _list(self) -> str:
        listing = self._kube.request("GET", path("pods"))
        for obj in listing.get("items", []):
            self._note(obj, None if self._listed else 0)
        self.relists += self._listed
        self._listed = True
        return str(listing["metadata"]["resourceVersion"])

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if not self._version:
                    self._version = self._list()
                for kind, obj in self._kube.watch(path("pods"), self._version, timeout=5):
                    meta = obj.get("metadata") or {}
                    self._version = str(meta.get("resourceVersion", self._version))
                    if kind != "BOOKMARK":
                        self._note(obj)
                    if self._stop.is_set():
                        return
            except (ApiError, OSError, ValueError, httpx.HTTPError) as e:
                if isinstance(e, ApiError) and e.status == 410:
                    self._version = ""
                else:
                    self._stop.wait(0.5)
