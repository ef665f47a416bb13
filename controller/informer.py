"""Resources kept current by list + watch, so that a reconcile pass reads memory, not the API.

One ``Informer`` per cluster-wide path. Until its first list succeeds, and again while its
kind is not served, it is not synced and reads go to the API server as before. A 410 lists
again; a dropped watch resumes from the last resourceVersion, serving what it has meanwhile
(as client-go's informers do). ``managedFields`` are dropped on the way in; per path, so may
be everything else the controller never reads (``controller.pods.slim_pod``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from controller.api import Api, ApiError, Obj

log = logging.getLogger("compactor.controller")


class Lister(Protocol):
    async def list(self, path: str, label_selector: str | None = None
                   ) -> tuple[list[Obj], str]: ...


def _key(obj: Mapping[str, object]) -> tuple[str, str]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


Slim = Callable[[Obj], Obj]


def _nothing(_: Obj) -> Obj:
    return {}


def drop_managed_fields(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


class Informer:
    def __init__(self, api: Api, path: str, wake: Callable[[], None] | None = None,
                 not_served_retry: float = 60.0, error_retry: float = 2.0,
                 slim: Slim = drop_managed_fields) -> None:
        self.api, self.path, self.wake, self.slim = api, path, wake, slim
        self.synced = False
        self.resource_version = ""
        self._objects: dict[tuple[str, str], Obj] = {}
        self._not_served_retry, self._error_retry = not_served_retry, error_retry

    def __len__(self) -> int:
        return len(self._objects)

    def items(self) -> list[Obj]:
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
                    self._objects = {_key(o): self.slim(o) for o in items}
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
                        self._objects[_key(obj)] = self.slim(obj)
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
    """The controller's reads: from an informer when one is synced for the path (and no
    selector is asked for), otherwise from the API server."""

    def __init__(self, api: Api, waking: Iterable[str], cached: Iterable[str] = (),
                 wake: Callable[[], None] | None = None,
                 slim: Mapping[str, Slim] | None = None) -> None:
        """Changes under ``waking`` paths wake the reconciler; ``cached`` paths keep their
        objects (``slim`` says, per path, what of each) and serve reads. A path only waking
        keeps nothing of its objects and serves nothing."""
        self.api = api
        self.wake = wake
        how = slim or {}
        self.cached = frozenset(cached)
        waking = frozenset(waking)
        self.by_path = {
            p: Informer(api, p, self._wake if p in waking else None,
                        slim=how.get(p, drop_managed_fields) if p in self.cached else _nothing)
            for p in sorted(waking | self.cached)}

    def objects(self) -> int:
        """Objects held for reads."""
        return sum(len(self.by_path[p]) for p in self.cached)

    def _wake(self) -> None:
        if self.wake is not None:
            self.wake()

    async def list(self, path: str, label_selector: str | None = None
                   ) -> tuple[list[Obj], str]:
        informer = self.by_path.get(path) if path in self.cached else None
        if informer is not None and informer.synced and label_selector is None:
            return informer.items(), informer.resource_version
        return await self.api.list(path, label_selector)

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
