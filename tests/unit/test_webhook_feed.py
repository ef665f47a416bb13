"""The owner watch feed: what it answers, what it leaves to the cached GET, how it recovers.

The API server is replaced by a scripted fake source here (the boundary under test is the
feed's own logic); the integration suite runs the feed against the real API server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from compaction.intent import Intent
from webhook.drain_marks import DrainMarks
from webhook.errors import NotServed, WatchExpired
from webhook.feed import KindStore, OwnerFeed, Source
from webhook.metrics import Metrics
from webhook.owners import OwnerCache, OwnerRecord

INTENT = Intent("p", {"compactor.dev/policy": "p"}, "compactor-scheduler")
RS = Source("ReplicaSet", "/apis/apps/v1/replicasets")


def rs(name: str, uid: str, intent: Intent | None = INTENT, rv: str = "1") -> dict[str, Any]:
    annotations = {"compactor.dev/intent": intent.render()} if intent else {}
    return {"metadata": {"namespace": "shop", "name": name, "uid": uid, "resourceVersion": rv,
                         "annotations": annotations}}


def synced(*items: dict[str, Any]) -> KindStore:
    store = KindStore(synced=True)
    store.replace(items)
    return store


def test_a_synced_store_answers_by_name_and_uid() -> None:
    store = synced(rs("web-1", "u1"))
    found = store.get("shop", "web-1", "u1")
    assert found is not None and found.intent == INTENT
    assert store.get("shop", "web-1", "u2") is None  # recreated: the GET path decides
    assert store.get("shop", "web-2", "u3") is None  # not seen yet: maybe watch lag
    assert store.get("other", "web-1", "u1") is None


def test_an_unsynced_store_answers_nothing() -> None:
    store = synced(rs("web-1", "u1"))
    store.synced = False
    assert store.get("shop", "web-1", "u1") is None


def test_events_update_and_delete_only_the_same_incarnation() -> None:
    store = synced(rs("web-1", "u1"))
    store.apply("MODIFIED", rs("web-1", "u1", intent=None))
    found = store.get("shop", "web-1", "u1")
    assert found is not None and found.intent is None
    store.apply("ADDED", rs("web-1", "u2"))
    store.apply("DELETED", rs("web-1", "u1"))  # the old one's late delete event
    assert store.get("shop", "web-1", "u2") is not None
    store.apply("DELETED", rs("web-1", "u2"))
    assert store.get("shop", "web-1", "u2") is None
    store.apply("BOOKMARK", {"metadata": {"resourceVersion": "9"}})
    assert store.objects == {}


class ScriptedSource:
    """A fake API server: each call to list or watch takes the next step of its script."""

    def __init__(self, lists: list[Any], watches: list[Any]) -> None:
        self.lists, self.watches = lists, watches
        self.calls: list[tuple[str, str]] = []
        self.done = asyncio.Event()

    async def list_metadata(self, path: str, page: int = 500
                            ) -> tuple[list[dict[str, Any]], str]:
        self.calls.append(("list", path))
        step = self.lists.pop(0)
        if isinstance(step, Exception):
            raise step
        items: list[dict[str, Any]] = step
        return items, "10"

    async def watch_metadata(self, path: str, resource_version: str,
                             opened: Callable[[], None] = lambda: None
                             ) -> AsyncIterator[dict[str, Any]]:
        self.calls.append(("watch", resource_version))
        if not self.watches:
            self.done.set()
            await asyncio.Event().wait()  # a quiet, healthy watch
        step = self.watches.pop(0)
        if isinstance(step, Exception):
            raise step
        opened()
        for event in step:
            yield event


async def _run_until_quiet(source: ScriptedSource, metrics: Metrics) -> OwnerFeed:
    feed = OwnerFeed(source, metrics, sources=[RS], rediscover_seconds=0, max_backoff=0,
                      limit_range_source=None)
    task = asyncio.create_task(feed.run())
    await asyncio.wait_for(source.done.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return feed


@pytest.mark.asyncio
async def test_feed_with_a_fake_source_lists_then_follows_and_relists_after_410() -> None:
    metrics = Metrics()
    source = ScriptedSource(
        lists=[[rs("web-1", "u1")], [rs("web-1", "u1"), rs("web-3", "u3")]],
        watches=[[{"type": "ADDED", "object": rs("web-2", "u2", rv="11")}],
                 WatchExpired("too old"), []])
    feed = await _run_until_quiet(source, metrics)
    # web-2 came by watch and went with the relist, which brought web-3.
    assert set(feed.stores["ReplicaSet"].objects) == {("shop", "web-1"), ("shop", "web-3")}
    # Resumed from the event's resourceVersion, then listed again after the 410.
    assert source.calls == [("list", "/apis/apps/v1/replicasets"), ("watch", "10"),
                            ("watch", "11"), ("list", "/apis/apps/v1/replicasets"),
                            ("watch", "10"), ("watch", "10")]
    assert metrics.registry.get_sample_value(
        "compactor_owner_watch_restarts_total", {"kind": "ReplicaSet", "reason": "expired"}
    ) == 1
    assert not feed.stores["ReplicaSet"].synced  # cancelled: nothing trusted any more


@pytest.mark.asyncio
async def test_feed_with_a_fake_source_forgets_a_kind_that_is_not_served() -> None:
    metrics = Metrics()
    source = ScriptedSource(lists=[[rs("web-1", "u1")], NotServed("gone"), []],
                            watches=[NotServed("CRD deleted")])
    feed = await _run_until_quiet(source, metrics)
    assert feed.stores["ReplicaSet"].objects == {}
    assert [c[0] for c in source.calls] == ["list", "watch", "list", "list", "watch"]


@pytest.mark.asyncio
async def test_feed_with_a_fake_source_stops_trusting_its_store_after_an_error() -> None:
    metrics = Metrics()
    source = ScriptedSource(lists=[[rs("web-1", "u1")]], watches=[
        RuntimeError("connection reset"), [{"type": "ADDED", "object": rs("web-2", "u2")}]])
    feed = await _run_until_quiet(source, metrics)
    assert metrics.registry.get_sample_value(
        "compactor_owner_watch_restarts_total", {"kind": "ReplicaSet", "reason": "error"}
    ) == 1
    assert [c[0] for c in source.calls] == ["list", "watch", "watch", "watch"]
    assert set(feed.stores["ReplicaSet"].objects) == {("shop", "web-1"), ("shop", "web-2")}


@pytest.mark.asyncio
async def test_owner_cache_asks_the_feed_first_and_falls_back_to_a_get() -> None:
    fetched: list[str] = []

    async def fetch(url: str) -> dict[str, Any] | None:
        fetched.append(url)
        return rs("web-9", "u9")

    store = synced(rs("web-1", "u1"))
    metrics = Metrics()

    def known(key: tuple[str, ...]) -> OwnerRecord | None:
        return store.get(key[0], key[2], key[3])

    cache = OwnerCache(fetch, metrics, known=known)
    hit = await cache.lookup(("shop", "ReplicaSet", "web-1", "u1"), "/x/web-1", "u1")
    assert hit.intent == INTENT and fetched == []
    await cache.lookup(("shop", "ReplicaSet", "web-9", "u9"), "/x/web-9", "u9")
    assert fetched == ["/x/web-9"]


@pytest.mark.asyncio
async def test_feed_with_a_fake_source_follows_only_the_marked_pods_into_the_drain_marks(
        ) -> None:
    marked = {"metadata": {"uid": "p1", "namespace": "shop", "resourceVersion": "12",
                           "ownerReferences": [{"uid": "u1", "controller": True}],
                           "annotations": {"compactor.dev/planned-node": "dense"}}}
    source = ScriptedSource(lists=[[marked]], watches=[[{"type": "MODIFIED", "object": {
        "metadata": {**marked["metadata"], "deletionTimestamp": "2026-12-07T00:00:00Z"}}}]])
    marks = DrainMarks()
    feed = OwnerFeed(source, Metrics(), sources=[], rediscover_seconds=0, max_backoff=0,
                     limit_range_source=None, marks=marks)
    task = asyncio.create_task(feed.run())
    await asyncio.wait_for(source.done.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert source.calls == [
        ("list", "/api/v1/pods?labelSelector=compactor.dev%2Fdraining"), ("watch", "10"),
        ("watch", "12")]
    assert marks.planned_node("p2", ("shop", "u1"), {"dense"}) == "dense"
