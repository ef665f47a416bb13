"""Resources kept current by list + watch, so that a reconcile pass reads memory, not the API.

One ``Informer`` per path (cluster-wide, or a namespace's with a label selector), described
by a ``Source``. Until its first list succeeds, and again while its kind is not served, it is
not synced and the reader goes to the API server instead. Lists are paginated and each page
is parsed before the next arrives, so a cluster's worth of raw objects is never in memory at
once. A 410 lists again; a dropped watch resumes from the last resourceVersion, serving what
it has meanwhile (as client-go's informers do). Each object is kept as its ``parse`` makes
it: a frozen record of what the controller reads (``controller.snapshot.snapshot``), never the whole
object.

The controller's own writes come back as the objects the API server answered with; ``observe``
puts each into the caches that hold its kind at once, and a record is only ever replaced by
one of a newer resourceVersion (``controller.kubeapi.resource_versions``). So a watch a moment
behind can never show a pass the state before the controller's last write, and the next pass never
plans from it (and so never undoes it) — the guarantee client-go's mutation cache gives.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

import orjson

from compaction import kinds
from controller.kubeapi.client import ApiError, Decode, Obj, WatchApi
from controller.kubeapi.resource_versions import newer

log = logging.getLogger("compactor.controller")
T = TypeVar("T")
WATCH_SECONDS: Final = 300


def _key(obj: Mapping[str, object]) -> tuple[str, str]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _version(obj: Mapping[str, object]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("resourceVersion") or "") if isinstance(meta, Mapping) else ""


def _labels(obj: Mapping[str, object]) -> Mapping[str, object]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def _nothing(_: Obj) -> None:
    return None


def drop_managed_fields(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


@dataclass(frozen=True)
class Source:
    """What one informer watches and keeps. ``parse`` None keeps nothing (the path only
    wakes the reconciler); ``selector`` is equality labels (``k=v,…``); ``wakes`` whether a
    change wakes the reconciler; ``same`` tells two records apart that need no new pass
    (a node's heartbeat changes its resourceVersion, nothing a pass reads)."""

    parse: Callable[[Obj], Any] | None = None
    # How a list's pages are decoded: through a schema of the fields ``parse`` and the
    # informer read (``controller.snapshot.pod_schema``), or whole.
    decode: Decode = orjson.loads
    wakes: bool = True
    selector: str = ""
    same: Callable[[Any, Any], bool] | None = None

    def selects(self, obj: Mapping[str, object]) -> bool:
        labels = _labels(obj)
        for term in filter(None, self.selector.split(",")):
            key, _, value = term.partition("=")
            if labels.get(key) != value:
                return False
        return True


class Informer(Generic[T]):
    def __init__(self, api: WatchApi, path: str, parse: Callable[[Obj], T],
                 wake: Callable[[], None] | None = None, not_served_retry: float = 60.0,
                 error_retry: float = 2.0, selector: str = "",
                 same: Callable[[T, T], bool] | None = None,
                 decode: Decode = orjson.loads) -> None:
        self.api, self.path, self.wake, self.parse = api, path, wake, parse
        self.selector, self.same, self.decode = selector, same, decode
        self.synced = False
        self.settled = False  # listed once, or found not served
        self.served = True  # False while the last list found the kind not installed
        self.resource_version = ""
        self._objects: dict[tuple[str, str], tuple[str, T]] = {}  # key -> (version, record)
        self._not_served_retry, self._error_retry = not_served_retry, error_retry

    def __len__(self) -> int:
        return len(self._objects)

    def items(self) -> list[T]:
        return [record for _, record in self._objects.values()]

    def _changed(self) -> None:
        if self.wake is not None:
            self.wake()

    def put(self, obj: Obj) -> bool:
        """Keep ``obj`` unless a newer version is held; True when a pass should see it."""
        key, version = _key(obj), _version(obj)
        if not key[1]:
            log.warning("%s: ignoring an object without a name: %.300s", self.path, obj)
            return False
        held = self._objects.get(key)
        if held is not None and not newer(version, held[0]):
            return False
        record = self.parse(obj)
        self._objects[key] = (version, record)
        return held is None or self.same is None or not self.same(held[1], record)

    async def _list(self) -> None:
        """A fresh list, page by page; a record written meanwhile that is newer than the
        list stays."""
        listed: dict[tuple[str, str], tuple[str, T]] = {}
        version = ""
        async for items, at in self.api.pages(self.path, self.selector or None,
                                              decode=self.decode):
            version = at
            for obj in items:
                if _key(obj)[1]:
                    listed[_key(obj)] = (_version(obj), self.parse(obj))
        for key, (held, record) in self._objects.items():
            if key in listed and newer(held, listed[key][0]):
                listed[key] = (held, record)
        self._objects, self.resource_version = listed, version

    async def run(self, stop: asyncio.Event) -> None:
        relist = True
        while not stop.is_set():
            try:
                if relist:
                    await self._list()
                    self.synced = self.settled = self.served = True
                    relist = False
                    self._changed()
                async for kind, obj in self.api.watch(
                        self.path, self.resource_version, watch_seconds(),
                        label_selector=self.selector or None):
                    self.resource_version = _version(obj) or self.resource_version
                    if kind == "BOOKMARK":
                        continue
                    if kind == "DELETED":
                        held = self._objects.get(_key(obj))
                        if held is not None and newer(_version(obj), held[0]):
                            del self._objects[_key(obj)]
                            self._changed()
                    elif self.put(obj):
                        self._changed()
            except asyncio.CancelledError:
                raise
            except ApiError as e:
                relist = True
                if e.status == 410:
                    continue
                if e.status == 404:  # kind not installed: reads fall back; look again later
                    self.synced, self._objects, self.settled = False, {}, True
                    self.served = False
                    await sleep_or_stop(stop, self._not_served_retry)
                else:
                    log.warning("watch %s: %s", self.path, e)
                    await sleep_or_stop(stop, self._error_retry)
            except Exception as e:  # a dropped stream, whatever the transport calls it
                log.warning("watch %s dropped, resuming: %s", self.path, e)
                await sleep_or_stop(stop, self._error_retry)


class Informers:
    """The controller's watch caches, one per path of ``sources``."""

    def __init__(self, api: WatchApi, sources: Mapping[str, Source],
                 wake: Callable[[], None] | None = None) -> None:
        self.wake = wake
        self.sources = dict(sources)
        self.by_path: dict[str, Informer[Any]] = {
            p: Informer(api, p, s.parse or _nothing, self._wake if s.wakes else None,
                        selector=s.selector, same=s.same, decode=s.decode)
            for p, s in sorted(self.sources.items())}

    def objects(self) -> int:
        """Objects held for reads."""
        return sum(len(self.by_path[p]) for p, s in self.sources.items() if s.parse)

    def unsettled(self) -> list[str]:
        """The caches that have neither listed once nor found their kind not served."""
        return [p for p, i in self.by_path.items() if not i.settled]

    def unserved(self, path: str) -> bool:
        """The cache of ``path`` found its kind not installed (it looks again later)."""
        informer = self.by_path.get(path)
        return informer is not None and not informer.served

    def synced(self, path: str) -> Informer[Any] | None:
        """The informer that serves reads of ``path`` now, if one is synced."""
        source = self.sources.get(path)
        informer = self.by_path.get(path) if source is not None and source.parse else None
        return informer if informer is not None and informer.synced else None

    def observe(self, obj: Obj) -> None:
        """An object as the API server answered a write: into every synced cache of its kind
        whose namespace and selector hold it."""
        kind = kinds.KINDS.get(str(obj.get("kind") or ""))
        if kind is None:
            return
        namespace = _key(obj)[0] or None
        for path in {kind.path(), kind.path(namespace)}:
            informer = self.synced(path)
            if informer is not None and self.sources[path].selects(obj):
                informer.put(obj)

    def _wake(self) -> None:
        if self.wake is not None:
            self.wake()

    async def run(self, stop: asyncio.Event) -> None:
        tasks = [asyncio.create_task(i.run(stop)) for i in self.by_path.values()]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def wait_synced(self, paths: Iterable[str], stop: asyncio.Event,
                          timeout: float) -> bool:
        """Until every cache of ``paths`` has listed or found its kind not served, at most
        ``timeout`` seconds: a first pass then reads memory instead of listing it again."""
        wanted = [self.by_path[p] for p in paths if p in self.by_path]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not all(i.settled for i in wanted):
            if stop.is_set() or loop.time() >= deadline:
                return False
            await asyncio.sleep(0.1)
        return True


def watch_seconds(minimum: int = WATCH_SECONDS) -> int:
    """How long one watch asks to run: between once and twice ``minimum``, at random (as
    client-go's reflectors do), so that the caches of one process, started together, do
    not all come back for a new watch in the same second."""
    return int(minimum * (1 + random.random()))


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
