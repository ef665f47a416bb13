"""Evictions by any actor and where their replacements landed, as a watch of the Pods shows
them: the API server marks a Pod it evicts with the ``DisruptionTarget`` condition
(``EvictionByEvictionAPI``) before deleting it, whoever asked (the descheduler's drains, the
runtime hook). Pure: ``localcluster.demo.pod_watch`` feeds it the watch's events in order."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

EVICTED_REASON = "EvictionByEvictionAPI"


@dataclass(frozen=True)
class Eviction:
    seq: int  # position in the watch: evictions and arrivals are ordered by it
    namespace: str
    name: str
    app: str
    node: str  # the node the evicted Pod left

    @property
    def workload(self) -> str:
        return f"{self.namespace}/{self.app}"


@dataclass(frozen=True)
class Arrival:
    seq: int  # when the Pod was first seen (0: before the watch began)
    namespace: str
    app: str
    node: str  # the node it was first bound to ("" while never bound)


def _evicted(obj: dict[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "DisruptionTarget" and c.get("reason") == EVICTED_REASON
               and c.get("status") == "True" for c in conditions)


@dataclass(frozen=True)
class PodLog:
    """What the watch has shown so far: each Pod's arrival (by uid) and each eviction once."""

    arrivals: dict[str, Arrival] = field(default_factory=dict)
    evictions: tuple[Eviction, ...] = ()
    evicted_uids: frozenset[str] = frozenset()

    def seen(self, obj: dict[str, Any], seq: int) -> PodLog:
        """The log with one more state of a Pod (a listed or watched object, deleted or not)."""
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        uid, node = str(meta.get("uid", "")), str(spec.get("nodeName") or "")
        ns, app = str(meta.get("namespace", "")), str((meta.get("labels") or {}).get("app", ""))
        arrivals = self.arrivals
        known = arrivals.get(uid)
        if known is None or (node and not known.node):
            arrival = Arrival(seq, ns, app, node) if known is None else replace(known, node=node)
            arrivals = {**arrivals, uid: arrival}
        if uid in self.evicted_uids or not _evicted(obj):
            return replace(self, arrivals=arrivals)
        eviction = Eviction(seq, ns, str(meta.get("name", "")), app, node)
        return PodLog(arrivals, (*self.evictions, eviction), self.evicted_uids | {uid})


def came_back(evictions: Sequence[Eviction], arrivals: Iterable[Arrival]) -> list[Eviction]:
    """The evictions whose replacement landed on the node the evicted Pod left. An eviction's
    replacement is the first Pod of the same workload seen after it that no earlier eviction
    took: both evictors here move one Pod of a workload at a time (the descheduler one Pod a
    run, the runtime hook the next only once the workload is whole again)."""
    waiting: dict[tuple[str, str], list[Arrival]] = {}
    for a in sorted(arrivals, key=lambda a: a.seq):
        waiting.setdefault((a.namespace, a.app), []).append(a)
    back = []
    for e in sorted(evictions, key=lambda e: e.seq):
        queue = waiting.get((e.namespace, e.app), [])
        while queue and queue[0].seq <= e.seq:
            queue.pop(0)
        if queue and queue.pop(0).node == e.node and e.node:
            back.append(e)
    return back


def by_workload(evictions: Iterable[Eviction]) -> dict[str, int]:
    """How many of these evictions each workload (namespace/app) had."""
    out: dict[str, int] = {}
    for e in evictions:
        out[e.workload] = out.get(e.workload, 0) + 1
    return dict(sorted(out.items()))


def among(evictions: Iterable[Eviction], made: Iterable[tuple[str, str]]) -> int:
    """How many of ``evictions`` are among ``made`` ("namespace/name", node), each once: the
    descheduler's own evictions, from its log."""
    left: dict[tuple[str, str], int] = {}
    for pod, node in made:
        left[(pod, node)] = left.get((pod, node), 0) + 1
    count = 0
    for e in evictions:
        key = (f"{e.namespace}/{e.name}", e.node)
        if left.get(key, 0) > 0:
            left[key] -= 1
            count += 1
    return count
