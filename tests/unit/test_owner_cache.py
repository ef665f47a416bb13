"""OwnerCache expiry, with a fake clock and FakeApi standing in for the API server's GET."""

from __future__ import annotations

import pytest

from tests.unit.webhook_fakes import RS, FakeApi, deployment_chain
from webhook.metrics import Metrics
from webhook.owners import OwnerCache


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.asyncio
async def test_entries_expire_after_their_ttl_and_negative_ones_sooner() -> None:
    api, clock = FakeApi(), Clock()
    deployment_chain(api)
    cache = OwnerCache(api.get, Metrics(), ttl=30, negative_ttl=5, clock=clock)
    assert (await cache.resolve("shop", RS)) is not None
    assert len(api.gets) == 2
    clock.now = 6  # the unannotated ReplicaSet has expired, the annotated Deployment has not
    await cache.resolve("shop", RS)
    assert len(api.gets) == 3
    clock.now = 31
    await cache.resolve("shop", RS)
    assert len(api.gets) == 5


@pytest.mark.asyncio
async def test_cache_is_bounded() -> None:
    api = FakeApi()
    cache = OwnerCache(api.get, Metrics(), maxsize=10)
    for i in range(50):
        await cache.namespace(f"ns-{i}")
    assert len(cache) == 10
