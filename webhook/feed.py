"""Owners fed by metadata-only watches, so that a warm webhook answers with no API call at all.

Per owner kind (and for namespaces), one paginated list and then a watch, cluster-wide. A
lookup asks the feed first. The feed only ever says "here it is": a kind whose watch is not
running, an object it has not seen yet (a new ReplicaSet's Pod can be admitted before the
ReplicaSet's watch event arrives) or one with another uid falls back to the cached GET, which
alone may conclude that an owner is absent. Intent changes reach admissions as fast as the
watch delivers them instead of after the cache TTL.

The same loop follows the Pods a drain marks (``webhook.drain_marks``) for the compaction
scheduler's extender.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from compaction import kinds
from compaction.limit_range import fingerprint
from compaction.ownership import CHAIN_KINDS
from webhook.drain_marks import PATH as MARKED_PODS
from webhook.drain_marks import DrainMarks
from webhook.errors import NotServed, WatchExpired
from webhook.metrics import WatchMetrics
from webhook.owners import OwnerRecord, record_of

log = logging.getLogger("compactor.webhook")


class MetadataSource(Protocol):
    async def list_metadata(self, path: str, page: int = 500
                            ) -> tuple[list[dict[str, Any]], str]: ...

    def watch_metadata(self, path: str, resource_version: str,
                       opened: Callable[[], None] = ...) -> AsyncIterator[dict[str, Any]]: ...


@dataclass(frozen=True)
class Source:
    kind: str
    path: str  # the cluster-wide collection


SOURCES: Final = tuple(Source(k, kinds.kind(k).path())
                       for k in ("Namespace", *sorted(CHAIN_KINDS)))
LIMIT_RANGES: Final = Source("LimitRange", kinds.kind("LimitRange").path())
DRAINS: Final = Source("Pod", MARKED_PODS)  # only the Pods a drain marks


class Store(Protocol):
    synced: bool
    served: bool

    def size(self) -> float: ...

    def replace(self, items: Iterable[Mapping[str, Any]]) -> None: ...

    def apply(self, event_type: str, obj: Mapping[str, Any]) -> None: ...

    def clear(self) -> None: ...

    def up(self) -> float:
        return 1.0 if self.synced else 0.0

    def is_served(self) -> float:
        return 1.0 if self.served else 0.0


@dataclass
class KindStore(Store):
    """One kind's objects as of the last event: (namespace, name) -> (uid, record)."""

    synced: bool = False
    served: bool = True
    objects: dict[tuple[str, str], tuple[str, OwnerRecord]] = field(default_factory=dict)

    def size(self) -> float:
        return float(len(self.objects))

    def clear(self) -> None:
        self.objects = {}

    def replace(self, items: Iterable[Mapping[str, Any]]) -> None:
        self.objects = dict(_entry(obj) for obj in items)

    def apply(self, event_type: str, obj: Mapping[str, Any]) -> None:
        key, value = _entry(obj)
        if event_type == "DELETED":
            if self.objects.get(key, ("",))[0] == value[0]:
                del self.objects[key]
        elif event_type in ("ADDED", "MODIFIED"):
            self.objects[key] = value

    def get(self, namespace: str, name: str, uid: str) -> OwnerRecord | None:
        if not self.synced:
            return None
        found = self.objects.get((namespace, name))
        if found is None or (uid and found[0] != uid):
            return None
        return found[1]


@dataclass
class LimitRangeStore(Store):
    """Which LimitRanges each namespace has, at which resourceVersion: a resource plan is
    applied only while these are the ones the controller checked it against."""

    synced: bool = False
    served: bool = True
    versions: dict[str, dict[str, str]] = field(default_factory=dict)  # ns -> name -> rv

    def size(self) -> float:
        return float(sum(len(v) for v in self.versions.values()))

    def clear(self) -> None:
        self.versions = {}

    def replace(self, items: Iterable[Mapping[str, Any]]) -> None:
        self.versions = {}
        for obj in items:
            self.apply("ADDED", obj)

    def apply(self, event_type: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if event_type == "DELETED":
            self.versions.get(ns, {}).pop(name, None)
        elif event_type in ("ADDED", "MODIFIED"):
            self.versions.setdefault(ns, {})[name] = str(meta.get("resourceVersion") or "")

    def fingerprint(self, namespace: str) -> str | None:
        if not self.synced:
            return None
        return fingerprint(self.versions.get(namespace, {}).items())


def _entry(obj: Mapping[str, Any]) -> tuple[tuple[str, str], tuple[str, OwnerRecord]]:
    meta = obj.get("metadata") or {}
    return ((str(meta.get("namespace") or ""), str(meta.get("name") or "")),
            (str(meta.get("uid") or ""), record_of(obj)))


class OwnerFeed:
    def __init__(self, source: MetadataSource, metrics: WatchMetrics,
                 sources: Iterable[Source] = SOURCES, rediscover_seconds: float = 60.0,
                 max_backoff: float = 30.0,
                 limit_range_source: Source | None = LIMIT_RANGES,
                 marks: DrainMarks | None = None) -> None:
        self._source = source
        self._sources = tuple(sources)
        self._rediscover = rediscover_seconds
        self._max_backoff = max_backoff
        self.stores = {s.kind: KindStore() for s in self._sources}
        self.limit_range_store = LimitRangeStore()
        self._followed = (*self._sources, *([limit_range_source] if limit_range_source else []),
                          *([DRAINS] if marks is not None else []))
        watched: dict[str, Store] = {**self.stores, LIMIT_RANGES.kind: self.limit_range_store}
        if marks is not None:
            watched[DRAINS.kind] = marks
        self._watched = watched
        for s in self._followed:
            store = watched[s.kind]
            metrics.watch_objects.labels(s.kind).set_function(store.size)
            metrics.watch_synced.labels(s.kind).set_function(store.up)
            metrics.watch_served.labels(s.kind).set_function(store.is_served)
            for reason in ("expired", "error"):
                metrics.watch_restarts.labels(s.kind, reason)
        self._metrics = metrics

    def get(self, key: tuple[str, ...]) -> OwnerRecord | None:
        """``key`` as the owner cache builds it: (namespace, kind, name, uid)."""
        namespace, kind, name, uid = key
        store = self.stores.get(kind)
        return store.get(namespace, name, uid) if store is not None else None

    def limit_ranges(self, namespace: str) -> str | None:
        """The namespace's LimitRanges fingerprint now; None until their watch has synced."""
        return self.limit_range_store.fingerprint(namespace)

    async def run(self) -> None:
        await asyncio.gather(*(self._follow(s) for s in self._followed))

    async def _follow(self, source: Source) -> None:
        store = self._watched[source.kind]
        rv: str | None = None
        backoff = first = min(1.0, self._max_backoff)

        def opened() -> None:
            store.synced = True

        while True:
            try:
                if rv is None:
                    items, rv = await self._source.list_metadata(source.path)
                    store.replace(items)
                    store.served = True
                async for event in self._source.watch_metadata(source.path, rv, opened):
                    obj = event.get("object") or {}
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                    store.apply(str(event.get("type")), obj)
                backoff = first
            except asyncio.CancelledError:
                store.synced = False
                raise
            except WatchExpired:
                self._metrics.watch_restarts.labels(source.kind, "expired").inc()
                rv = None
            except NotServed:
                if store.synced or store.size():
                    log.info("%s no longer served; owner lookups use GETs", source.kind)
                store.synced, store.served, rv = False, False, None
                store.clear()
                await asyncio.sleep(self._rediscover)
            except Exception as e:
                store.synced = False
                self._metrics.watch_restarts.labels(source.kind, "error").inc()
                log.warning("watch of %s failed, retrying in %.0f s: %s", source.kind,
                            backoff, e)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._max_backoff)
