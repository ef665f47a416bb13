"""OwnerCache expiry, with a fake clock and FakeApi standing in for the API server's GET."""

from __future__ import annotations

import asyncio

import pytest

from tests.unit.webhook_fakes import RS, FakeApi, deployment_chain
from webhook.metrics import Metrics
from webhook.owners import OwnerCache, namespace_path


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
async def test_a_namespace_lasts_the_full_ttl_and_an_absent_one_the_negative_ttl() -> None:
    api, clock = FakeApi(), Clock()
    api.add_namespace("shop")
    cache = OwnerCache(api.get, Metrics(), ttl=30, negative_ttl=5, clock=clock)
    await cache.namespace("shop")
    await cache.namespace("gone")
    clock.now = 6  # the controller never annotates a namespace: no reason to ask again yet
    await cache.namespace("shop")
    await cache.namespace("gone")
    assert api.gets == [*map(namespace_path, ("shop", "gone", "gone"))]
    clock.now = 31
    await cache.namespace("shop")
    assert api.gets[-1] == namespace_path("shop") and len(api.gets) == 4


@pytest.mark.asyncio
async def test_cache_is_bounded() -> None:
    api = FakeApi()
    cache = OwnerCache(api.get, Metrics(), maxsize=10)
    for i in range(50):
        await cache.namespace(f"ns-{i}")
    assert len(cache) == 10


@pytest.mark.asyncio
async def test_a_caller_joining_a_lookup_keeps_its_own_budget() -> None:
    """The first caller gives up early; the one that joined its GET still gets the answer."""
    api = FakeApi(delay=0.2)
    deployment_chain(api)
    cache = OwnerCache(api.get, Metrics())

    async def impatient() -> None:
        async with asyncio.timeout(0.05):
            await cache.resolve("shop", RS)

    first = asyncio.create_task(impatient())
    await asyncio.sleep(0.01)  # the first caller's GET is in flight
    patient = asyncio.create_task(cache.resolve("shop", RS))
    with pytest.raises(TimeoutError):
        await first
    found = await patient
    assert found is not None and found.owner_kind == "Deployment"
    assert api.gets.count("/apis/apps/v1/namespaces/shop/replicasets/web-abc") == 1


@pytest.mark.asyncio
async def test_a_lookup_nobody_waits_for_any_more_still_fills_the_cache() -> None:
    api = FakeApi(delay=0.05)
    deployment_chain(api)
    cache = OwnerCache(api.get, Metrics())
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await cache.resolve("shop", RS)
    await asyncio.sleep(0.2)
    assert await cache.resolve("shop", RS) is not None
    # The ReplicaSet's GET, abandoned by its caller, was answered into the cache.
    assert api.gets.count("/apis/apps/v1/namespaces/shop/replicasets/web-abc") == 1
