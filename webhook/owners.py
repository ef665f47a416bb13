"""Owner-chain resolution through a bounded TTL+LRU cache with negative entries and single-flight.

A burst of Pods from one ReplicaSet costs one GET per owner: the first lookup of a key starts
the request, the others await the same future. Keys carry the owner's uid, so an owner that
was deleted and recreated under the same name is a different key: a miss, never a stale hit.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from cachetools import TLRUCache

from compaction import names
from compaction.intent import Intent, parse_intent
from webhook.metrics import Metrics
from webhook.review import OwnerRef, controller_ref

# Kinds the chain may pass through, with their REST plural. ReplicaSet is only ever a step.
PLURALS: Final[Mapping[str, str]] = {
    "ReplicaSet": "replicasets", "Deployment": "deployments", "StatefulSet": "statefulsets",
    "DaemonSet": "daemonsets", "Job": "jobs", "CronJob": "cronjobs", "Rollout": "rollouts",
    "AnalysisRun": "analysisruns", "StrimziPodSet": "strimzipodsets", "Model": "models",
}
MAX_DEPTH: Final = 4

Fetch = Callable[[str], Awaitable[dict[str, Any] | None]]
# What a watch feed knows of a key, or None: then the cache and the GET decide.
Known = Callable[[tuple[str, ...]], "OwnerRecord | None"]


class LookupFailed(Exception):
    """The API server could not answer an owner lookup (not a 404)."""


class UnusableIntent(Exception):
    """The nearest annotated owner's intent cannot be read (unknown version, garbage)."""


class OptedOut(Exception):
    """An owner up the chain carries ``compactor.dev/ignore: "true"``."""


def owner_path(namespace: str, ref: OwnerRef) -> str:
    group_version = ref.api_version
    base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    return f"{base}/namespaces/{namespace}/{PLURALS[ref.kind]}/{ref.name}"


@dataclass(frozen=True, slots=True)
class OwnerRecord:
    """What the webhook keeps of one owner: small, so 100k of them fit in little memory."""

    intent: Intent | None
    rendered: str | None
    intent_error: str | None
    parent: OwnerRef | None
    ignored: bool


@dataclass(frozen=True, slots=True)
class Resolution:
    intent: Intent
    rendered: str
    owner_kind: str
    owner_name: str


_ABSENT: Final = OwnerRecord(None, None, None, None, False)


@functools.lru_cache(maxsize=4096)
def _parsed(raw: str) -> tuple[Intent | None, str | None, str | None]:
    """Owners of one policy share an annotation text: parse it once, share the objects."""
    parsed = parse_intent(raw)
    if parsed.intent is not None:
        return parsed.intent, parsed.intent.render(), None
    return None, None, str(parsed.error)


def record_of(obj: Mapping[str, Any]) -> OwnerRecord:
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    raw = annotations.get(names.INTENT_ANNOTATION)
    intent, rendered, error = _parsed(raw) if isinstance(raw, str) else (None, None, None)
    parent = controller_ref(meta.get("ownerReferences"))
    if parent is not None and parent.kind not in PLURALS:
        parent = None
    elif parent is not None:
        parent = OwnerRef(sys.intern(parent.api_version), sys.intern(parent.kind), parent.name,
                          parent.uid)
    return OwnerRecord(intent, rendered, error, parent,
                       labels.get(names.IGNORE_LABEL) == "true")


class OwnerCache:
    def __init__(self, fetch: Fetch, metrics: Metrics, maxsize: int = 100_000,
                 ttl: float = 30.0, negative_ttl: float = 5.0,
                 clock: Callable[[], float] = time.monotonic, known: Known | None = None
                 ) -> None:
        self._fetch = fetch
        self.known = known
        self._metrics = metrics
        self._ttl, self._negative_ttl = ttl, negative_ttl
        # Unannotated owners expire fast too: the controller may annotate them any moment
        # (the Job/AnalysisRun race of the reference docs).
        self._cache: TLRUCache[tuple[str, ...], OwnerRecord] = TLRUCache(
            maxsize=maxsize, ttu=self._ttu, timer=clock)
        self._inflight: dict[tuple[str, ...], asyncio.Future[OwnerRecord]] = {}
        metrics.track_cache(lambda: len(self._cache))

    def _ttu(self, _key: tuple[str, ...], value: OwnerRecord, now: float) -> float:
        return now + (self._ttl if value.intent is not None or value.ignored
                      else self._negative_ttl)

    def __len__(self) -> int:
        return len(self._cache)

    def put(self, key: tuple[str, ...], record: OwnerRecord) -> None:
        self._cache[key] = record

    async def lookup(self, key: tuple[str, ...], url: str, uid: str) -> OwnerRecord:
        if self.known is not None:
            watched = self.known(key)
            if watched is not None:
                self._metrics.lookups.labels("hit").inc()
                return watched
        cached = self._cache.get(key)
        if cached is not None:
            self._metrics.lookups.labels("negative" if cached is _ABSENT else "hit").inc()
            return cached
        pending = self._inflight.get(key)
        if pending is not None:
            self._metrics.lookups.labels("hit").inc()
            return await asyncio.shield(pending)
        future: asyncio.Future[OwnerRecord] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            record = await self._load(url, uid)
        except BaseException as e:
            future.set_exception(e if isinstance(e, Exception) else LookupFailed(repr(e)))
            future.exception()  # retrieved here, so a burst with no waiters logs nothing
            raise
        else:
            future.set_result(record)
            self._cache[key] = record
            return record
        finally:
            del self._inflight[key]

    async def _load(self, url: str, uid: str) -> OwnerRecord:
        self._metrics.api_requests.inc()
        try:
            obj = await self._fetch(url)
        except LookupFailed:
            self._metrics.lookups.labels("error").inc()
            raise
        self._metrics.lookups.labels("miss").inc()
        if obj is None:
            return _ABSENT
        if uid and (obj.get("metadata") or {}).get("uid") != uid:
            return _ABSENT  # recreated under the same name: not this Pod's owner
        return record_of(obj)

    async def owner(self, namespace: str, ref: OwnerRef) -> OwnerRecord:
        key = (sys.intern(namespace), sys.intern(ref.kind), ref.name, ref.uid)
        return await self.lookup(key, owner_path(namespace, ref), ref.uid)

    async def namespace(self, name: str) -> OwnerRecord:
        return await self.lookup(("", "Namespace", name, ""), f"/api/v1/namespaces/{name}", "")

    async def resolve(self, namespace: str, ref: OwnerRef | None) -> Resolution | None:
        """The intent of the nearest annotated owner up the controller chain, if any."""
        depth = 0
        while ref is not None and ref.kind in PLURALS and depth < MAX_DEPTH:
            record = await self.owner(namespace, ref)
            if record.ignored:
                raise OptedOut(f"{ref.kind}/{ref.name}")
            if record.intent is not None and record.rendered is not None:
                return Resolution(record.intent, record.rendered, ref.kind, ref.name)
            if record.intent_error is not None:
                self._metrics.intent_errors.labels(record.intent_error).inc()
                raise UnusableIntent(f"{ref.kind}/{ref.name}: {record.intent_error}")
            ref = record.parent
            depth += 1
        return None
