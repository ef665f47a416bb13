"""Resources kept current by list + watch, so that a reconcile pass reads memory, not the API.

One ``Informer`` per cluster-wide path. Until its first list succeeds, and again while its
kind is not served, it is not synced and the reader goes to the API server instead. A 410
lists again; a dropped watch resumes from the last resourceVersion, serving what it has
meanwhile (as client-go's informers do). Each object is kept as its ``parse`` makes it: a
frozen record of what the controller reads (``controller.snapshot``), never the whole object.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

from controller.api import ApiError, Obj, WatchApi

log = logging.getLogger("compactor.controller")
T = TypeVar("T")


def _key(obj: Mapping[str, object]) -> tuple[str, str]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _nothing(_: Obj) -> None:
    return None


def drop_managed_fields(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


class Informer(Generic[T]):
    def __init__(self, api: WatchApi, path: str, parse: Callable[[Obj], T],
                 wake: Callable[[], None] | None = None, not_served_retry: float = 60.0,
                 error_retry: float = 2.0) -> None:
        self.api, self.path, self.wake, self.parse = api, path, wake, parse
        self.synced = False
        self.resource_version = ""
        self._objects: dict[tuple[str, str], T] = {}
        self._not_served_retry, self._error_retry = not_served_retry, error_retry

    def __len__(self) -> int:
        return len(self._objects)

    def items(self) -> list[T]:
        return list(self._objects.values())

    def _changed(self) -> None:
        if self.wake is not None:
            self.wake()

    async def run(self, stop: asyncio.Event) -> None:
        relist = True
        while not stop.is_set():
            try:
                if relist:
                    items, self.resource_version = await self.api.list(self.path)
                    self._objects = {_key(o): self.parse(o) for o in items}
                    self.synced, relist = True, False
                    self._changed()
                async for kind, obj in self.api.watch(self.path, self.resource_version):
                    meta = obj.get("metadata") or {}
                    self.resource_version = str(meta.get("resourceVersion")
                                                or self.resource_version)
                    if kind == "BOOKMARK":
                        continue
                    if kind == "DELETED":
                        self._objects.pop(_key(obj), None)
                    else:
                        self._objects[_key(obj)] = self.parse(obj)
                    self._changed()
            except asyncio.CancelledError:
                raise
            except ApiError as e:
                relist = True
                if e.status == 410:
                    continue
                if e.status == 404:  # kind not installed: reads fall back; look again later
                    self.synced, self._objects = False, {}
                    await sleep_or_stop(stop, self._not_served_retry)
                else:
                    log.warning("watch %s: %s", self.path, e)
                    await sleep_or_stop(stop, self._error_retry)
            except Exception as e:  # a dropped stream, whatever the transport calls it
                log.warning("watch %s dropped, resuming: %s", self.path, e)
                await sleep_or_stop(stop, self._error_retry)


class Informers:
    """The controller's watch caches: every path in ``waking`` wakes the reconciler on a
    change; every path in ``cached`` keeps its objects, each as ``parse[path]`` makes it. A
    path that only wakes keeps nothing."""

    def __init__(self, api: WatchApi, waking: Iterable[str],
                 cached: Mapping[str, Callable[[Obj], Any]] | None = None,
                 wake: Callable[[], None] | None = None) -> None:
        self.wake = wake
        self.cached = dict(cached or {})
        waking = frozenset(waking)
        self.by_path: dict[str, Informer[Any]] = {
            p: Informer(api, p, self.cached.get(p, _nothing),
                        self._wake if p in waking else None)
            for p in sorted(waking | set(self.cached))}

    def objects(self) -> int:
        """Objects held for reads."""
        return sum(len(self.by_path[p]) for p in self.cached)

    def synced(self, path: str) -> Informer[Any] | None:
        """The informer that serves reads of ``path`` now, if one is synced."""
        informer = self.by_path.get(path) if path in self.cached else None
        return informer if informer is not None and informer.synced else None

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


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
