"""Every change to the Pods of some namespaces, as a watch of the harness's own saw it, each
with the moment it arrived: what lets a run tell afterwards whether a workload was back at
full strength between two evictions.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import httpx

from localcluster.cluster.kube import ApiError, Credentials, Kube, Obj, path


@dataclass(frozen=True)
class PodState:
    at: float  # wall-clock seconds, comparable with the audit log's timestamps
    namespace: str
    name: str
    app: str
    ready: bool
    deleting: bool
    present: bool = True
    bound: bool = True  # has a node (a Pod waiting for a scheduler has none)

    @property
    def workload(self) -> str:
        return f"{self.namespace}/{self.app}"


def _state(obj: Obj, at: float, present: bool = True) -> PodState:
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or [])
    return PodState(at, str(meta.get("namespace", "")), str(meta.get("name", "")),
                    str((meta.get("labels") or {}).get("app", "")), ready,
                    bool(meta.get("deletionTimestamp")), present,
                    bool((obj.get("spec") or {}).get("nodeName")))


class PodTimeline:
    """A thread that lists, then watches, every Pod; after a broken watch it lists again and
    records the difference (changes in between are lost, and said so in ``relists``)."""

    def __init__(self, creds: Credentials, namespaces: set[str]) -> None:
        self.namespaces = namespaces
        self.records: list[PodState] = []
        self.relists = 0
        self._kube = Kube(creds, timeout=10)
        self._known: dict[tuple[str, str], PodState] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="pod-timeline", daemon=True)

    def start(self) -> PodTimeline:
        self._relist()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(70)
        self._kube.close()

    def snapshot(self) -> list[PodState]:
        with self._lock:
            return list(self.records)

    def pod_app(self, namespace: str, name: str) -> str | None:
        with self._lock:
            for r in reversed(self.records):
                if r.namespace == namespace and r.name == name:
                    return r.app
        return None

    def _note(self, state: PodState) -> None:
        if state.namespace not in self.namespaces:
            return
        with self._lock:
            self.records.append(state)
            key = (state.namespace, state.name)
            if state.present:
                self._known[key] = state
            else:
                self._known.pop(key, None)

    def _relist(self) -> str:
        listing = self._kube.request("GET", path("pods"))
        now = time.time()
        seen = set()
        for obj in listing.get("items", []):
            state = _state(obj, now)
            seen.add((state.namespace, state.name))
            if self._known.get((state.namespace, state.name)) != state:
                self._note(state)
        for key, old in list(self._known.items()):
            if key not in seen:
                self._note(PodState(now, old.namespace, old.name, old.app, False, False, False))
        self.relists += 1
        return str(listing["metadata"]["resourceVersion"])

    def _run(self) -> None:
        version = ""
        while not self._stop.is_set():
            try:
                if not version:
                    version = self._relist()
                for kind, obj in self._kube.watch(path("pods"), version, timeout=30):
                    if self._stop.is_set():
                        return
                    version = str((obj.get("metadata") or {}).get("resourceVersion", version))
                    if kind != "BOOKMARK":
                        self._note(_state(obj, time.time(), present=kind != "DELETED"))
            except (ApiError, OSError, ValueError, httpx.HTTPError) as e:
                # The API server restarting, or a 410 after etcd compacted: list again.
                version = ""
                if not isinstance(e, ApiError) or e.status != 410:
                    self._stop.wait(0.5)
