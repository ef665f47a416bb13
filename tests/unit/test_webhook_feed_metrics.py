"""What the watch feed tells Prometheus: a kind the API server does not serve is told apart
from a watch that is down, and restart counters exist from the start (so that rate() and
increase() see their first increment). The API server is a scripted fake source here."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from webhook.errors import NotServed
from webhook.feed import OwnerFeed, Source
from webhook.metrics import Metrics

RS = Source("ReplicaSet", "/apis/apps/v1/replicasets")
MODEL = Source("Model", "/apis/kubeai.org/v1/models")


class Script:
    """Per path, the answers of successive lists; a quiet healthy watch after a good list."""

    def __init__(self, lists: dict[str, list[Any]]) -> None:
        self.lists = lists
        self.listed: dict[str, int] = {p: 0 for p in lists}

    async def list_metadata(self, path: str, page: int = 500
                            ) -> tuple[list[dict[str, Any]], str]:
        self.listed[path] += 1
        steps = self.lists[path]
        step = steps.pop(0) if len(steps) > 1 else steps[0]
        if isinstance(step, Exception):
            raise step
        items: list[dict[str, Any]] = step
        return items, "1"

    async def watch_metadata(self, path: str, resource_version: str,
                             opened: Callable[[], None] = lambda: None
                             ) -> AsyncIterator[dict[str, Any]]:
        opened()
        await asyncio.Event().wait()
        yield {}  # never reached; makes this an async generator


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


@asynccontextmanager
async def running(feed: OwnerFeed, until: Callable[[], bool]) -> AsyncIterator[None]:
    """The feed runs until ``until`` holds, and on while the block reads its metrics."""
    task = asyncio.create_task(feed.run())
    try:
        for _ in range(200):
            if until():
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the feed never reached the expected state")
        yield
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


@pytest.mark.asyncio
async def test_feed_with_a_fake_source_reports_an_unserved_kind_as_not_served() -> None:
    metrics = Metrics()
    script = Script({RS.path: [[]], MODEL.path: [NotServed("no CRD")]})
    feed = OwnerFeed(script, metrics, sources=[RS, MODEL], rediscover_seconds=30)

    def both_tried() -> bool:
        return feed.stores["ReplicaSet"].synced and script.listed[MODEL.path] > 0

    async with running(feed, both_tried):
        assert sample(metrics, "compactor_owner_watch_synced", kind="ReplicaSet") == 1
        assert sample(metrics, "compactor_owner_watch_served", kind="ReplicaSet") == 1
        # Not synced, and rightly so: no alert should take this for a watch that is down.
        assert sample(metrics, "compactor_owner_watch_synced", kind="Model") == 0
        assert sample(metrics, "compactor_owner_watch_served", kind="Model") == 0


@pytest.mark.asyncio
async def test_feed_with_a_fake_source_reports_a_kind_served_again_once_it_lists() -> None:
    metrics = Metrics()
    script = Script({MODEL.path: [NotServed("no CRD yet"), []]})
    feed = OwnerFeed(script, metrics, sources=[MODEL], rediscover_seconds=0)
    async with running(feed, lambda: feed.stores["Model"].synced):
        assert sample(metrics, "compactor_owner_watch_served", kind="Model") == 1
        assert script.listed[MODEL.path] == 2


@pytest.mark.asyncio
async def test_feed_with_a_fake_source_reports_a_failing_watch_as_served_and_not_synced() -> None:
    metrics = Metrics()
    script = Script({RS.path: [RuntimeError("HTTP 403")]})
    feed = OwnerFeed(script, metrics, sources=[RS], max_backoff=0.01)
    async with running(feed, lambda: script.listed[RS.path] >= 3):
        assert sample(metrics, "compactor_owner_watch_synced", kind="ReplicaSet") == 0
        assert sample(metrics, "compactor_owner_watch_served", kind="ReplicaSet") == 1
        errors = sample(metrics, "compactor_owner_watch_restarts_total", kind="ReplicaSet",
                        reason="error")
        assert errors is not None and errors >= 2


def test_restart_counters_exist_at_zero_before_any_restart() -> None:
    metrics = Metrics()
    OwnerFeed(Script({}), metrics, sources=[RS, MODEL])
    for kind in ("ReplicaSet", "Model"):
        for reason in ("expired", "error"):
            assert sample(metrics, "compactor_owner_watch_restarts_total", kind=kind,
                          reason=reason) == 0
