"""From a Pod's controller reference up to its workload, whose intent alone decides.

Intermediate owners (a ReplicaSet, a CronJob's Job) are followed but never read for intent
(``compaction.ownership``). Lookups go through a bounded TTL+LRU cache with negative entries
and single-flight: a burst of Pods from one ReplicaSet costs one GET per owner (the
ReplicaSet, then its Deployment), and each waiting admission keeps its own time budget: the
GET runs on its own, so the first caller giving up fails nobody else. Keys carry the owner's
uid, so an owner deleted and recreated under the same name is a miss, never a stale hit.
Nothing from an owner reference reaches a request unless it passes the API server's rules.
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

from compaction import kinds, names
from compaction.identifiers import is_dns_label, is_dns_subdomain, parse_api_version
from compaction.intent import Intent, parse_intent
from compaction.ownership import CHAIN_KINDS, MAX_DEPTH, is_intermediate
from compaction.resource_plan import ResourcePlan, parse_resource_plan
from webhook.errors import InvalidOwnerReference, LookupFailed, OptedOut, UnusableIntent
from webhook.metrics import Metrics
from webhook.review import OwnerRef, controller_ref

Fetch = Callable[[str], Awaitable[dict[str, Any] | None]]
# What a watch feed knows of a key, or None: then the cache and the GET decide.
Known = Callable[[tuple[str, ...]], "OwnerRecord | None"]


# Both are pure and asked on every admission with the same few arguments (a ReplicaSet's Pods
# share their owner): computed, and validated, once.
@functools.lru_cache(maxsize=65536)
def namespace_path(namespace: str) -> str:
    if not is_dns_label(namespace):
        raise InvalidOwnerReference(f"namespace {namespace[:80]!r} is not a namespace name")
    return kinds.kind("Namespace").path(name=namespace)


@functools.lru_cache(maxsize=65536)
def owner_path(namespace: str, ref: OwnerRef) -> str | None:
    """The GET path of an owner; None for a kind that is not Compactor's (another group's
    ReplicaSet, say); InvalidOwnerReference for a reference no request may be built from."""
    if ref.kind not in CHAIN_KINDS:
        return None
    group_version = parse_api_version(ref.api_version)
    if group_version is None:
        raise InvalidOwnerReference(f"apiVersion {ref.api_version[:80]!r} is not group/version")
    kind = kinds.kind(ref.kind)
    if group_version[0] != kind.group:
        return None
    if not is_dns_subdomain(ref.name):
        raise InvalidOwnerReference(f"{ref.kind} name {ref.name[:80]!r} is not an object name")
    namespace_path(namespace)
    return kind.path(namespace, ref.name)


@dataclass(frozen=True, slots=True)
class OwnerRecord:
    """What the webhook keeps of one owner: small, so 100k of them fit in little memory."""

    intent: Intent | None
    rendered: str | None
    intent_error: str | None
    parent: OwnerRef | None
    ignored: bool
    resources: ResourcePlan | None = None  # the static policies' plan, when there is one
    resources_error: str | None = None

    @property
    def asks(self) -> bool:
        """Carries something for its Pods (so it is kept for the long TTL)."""
        return self.intent is not None or self.resources is not None


@dataclass(frozen=True, slots=True)
class Resolution:
    """What the Pod's workload asks: a compaction intent, a resource plan, or both."""

    intent: Intent | None
    rendered: str | None
    owner_kind: str
    owner_name: str
    resources: ResourcePlan | None = None


_ABSENT: Final = OwnerRecord(None, None, None, None, False)


@functools.lru_cache(maxsize=4096)
def _parsed(raw: str) -> tuple[Intent | None, str | None, str | None]:
    """Owners of one policy share an annotation text: parse it once, share the objects."""
    parsed = parse_intent(raw)
    if parsed.intent is not None:
        return parsed.intent, parsed.intent.render(), None
    return None, None, str(parsed.error)


@functools.lru_cache(maxsize=4096)
def _plan(raw: str) -> tuple[ResourcePlan | None, str | None]:
    parsed = parse_resource_plan(raw)
    return parsed.plan, None if parsed.plan is not None else str(parsed.error)


def record_of(obj: Mapping[str, Any]) -> OwnerRecord:
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    raw = annotations.get(names.INTENT_ANNOTATION)
    intent, rendered, error = _parsed(raw) if isinstance(raw, str) else (None, None, None)
    raw_plan = annotations.get(names.RESOURCES_ANNOTATION)
    plan, plan_error = _plan(raw_plan) if isinstance(raw_plan, str) else (None, None)
    parent = controller_ref(meta.get("ownerReferences"))
    if parent is not None and parent.kind not in CHAIN_KINDS:
        parent = None
    elif parent is not None:
        parent = OwnerRef(sys.intern(parent.api_version), sys.intern(parent.kind), parent.name,
                          parent.uid)
    return OwnerRecord(intent, rendered, error, parent,
                       labels.get(names.IGNORE_LABEL) == "true", plan, plan_error)


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
        # (the Job/AnalysisRun race of the reference docs). Namespaces do not.
        self._cache: TLRUCache[tuple[str, ...], OwnerRecord] = TLRUCache(
            maxsize=maxsize, ttu=self._ttu, timer=clock)
        self._inflight: dict[tuple[str, ...], asyncio.Task[OwnerRecord]] = {}
        metrics.track_cache(lambda: len(self._cache))
        self._hit, self._negative = metrics.lookups.labels("hit"), metrics.lookups.labels(
            "negative")

    def _ttu(self, key: tuple[str, ...], value: OwnerRecord, now: float) -> float:
        # A namespace is never annotated by the controller, only opted out by a person: its
        # record lasts as long as any answer, or a cold burst outlasts it and asks again.
        lasting = value.asks or value.ignored or (key[1] == "Namespace" and value is not _ABSENT)
        return now + (self._ttl if lasting else self._negative_ttl)

    def __len__(self) -> int:
        return len(self._cache)

    def put(self, key: tuple[str, ...], record: OwnerRecord) -> None:
        self._cache[key] = record

    def at_hand(self, key: tuple[str, ...]) -> OwnerRecord | None:
        """The record a lookup returns without waiting: the watch feed's, else the cache's
        (counted as the lookup's result); None when only the API server can tell."""
        if self.known is not None:
            watched = self.known(key)
            if watched is not None:
                self._hit.inc()
                return watched
        cached = self._cache.get(key)
        if cached is not None:
            (self._negative if cached is _ABSENT else self._hit).inc()
        return cached

    async def lookup(self, key: tuple[str, ...], url: str, uid: str,
                     deadline: float | None = None) -> OwnerRecord:
        """``deadline``: the event loop's time by which the caller must have its answer; only
        a lookup that waits for the API server can reach it, so only that one arms a timer
        (TimeoutError past it)."""
        return self.at_hand(key) or await self._fetched(key, url, uid, deadline)

    async def _fetched(self, key: tuple[str, ...], url: str, uid: str,
                       deadline: float | None) -> OwnerRecord:
        """The record from the one GET in flight for ``key`` (started when there is none)."""
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._load(key, url, uid))
            self._inflight[key] = task
            task.add_done_callback(functools.partial(self._landed, key))
        else:
            self._metrics.lookups.labels("hit").inc()
        # Shielded: a caller whose own budget runs out stops waiting; the GET goes on for the
        # others, and its answer still fills the cache.
        if deadline is None:
            return await asyncio.shield(task)
        async with asyncio.timeout_at(deadline):
            return await asyncio.shield(task)

    def _landed(self, key: tuple[str, ...], task: asyncio.Task[OwnerRecord]) -> None:
        if self._inflight.get(key) is task:
            del self._inflight[key]
        if not task.cancelled():
            task.exception()  # retrieved, so a failure nobody waited for logs nothing

    async def _load(self, key: tuple[str, ...], url: str, uid: str) -> OwnerRecord:
        self._metrics.api_requests.inc()
        try:
            obj = await self._fetch(url)
        except LookupFailed:
            self._metrics.lookups.labels("error").inc()
            raise
        self._metrics.lookups.labels("miss").inc()
        if obj is None:
            record = _ABSENT
        elif uid and (obj.get("metadata") or {}).get("uid") != uid:
            record = _ABSENT  # recreated under the same name: not this Pod's owner
        else:
            record = record_of(obj)
        self._cache[key] = record
        return record

    def _owner_key(self, namespace: str, ref: OwnerRef) -> tuple[tuple[str, ...], str] | None:
        """The owner's cache key and GET path; None when its kind is not one Compactor
        follows."""
        try:
            url = owner_path(namespace, ref)
        except InvalidOwnerReference:
            self._metrics.lookups.labels("invalid").inc()
            raise
        if url is None:
            return None
        return (sys.intern(namespace), sys.intern(ref.kind), ref.name, ref.uid), url

    async def namespace(self, name: str, deadline: float | None = None) -> OwnerRecord:
        try:
            url = namespace_path(name)
        except InvalidOwnerReference:
            self._metrics.lookups.labels("invalid").inc()
            raise
        key = ("", "Namespace", name, "")
        return self.at_hand(key) or await self._fetched(key, url, "", deadline)

    async def resolve(self, namespace: str, ref: OwnerRef | None,
                      deadline: float | None = None) -> Resolution | None:
        """The intent of the Pod's workload, up the controller chain past intermediates."""
        depth = 0
        while ref is not None and depth < MAX_DEPTH:
            # A warm admission's records are all at hand: no coroutine per step.
            found = self._owner_key(namespace, ref)
            if found is None:
                return None
            key, url = found
            record = self.at_hand(key) or await self._fetched(key, url, ref.uid, deadline)
            if record.ignored:
                raise OptedOut(f"{ref.kind}/{ref.name}")
            parent = record.parent
            if is_intermediate(ref.kind, parent.kind if parent else None):
                ref, depth = parent, depth + 1
                continue
            for error in (record.intent_error, record.resources_error):
                if error is not None:
                    self._metrics.intent_errors.labels(error).inc()
                    raise UnusableIntent(f"{ref.kind}/{ref.name}: {error}")
            if not record.asks:
                return None
            return Resolution(record.intent, record.rendered, ref.kind, ref.name,
                              record.resources)
        return None
