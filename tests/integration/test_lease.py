"""Leader election on the real API server: one holder at a time, takeover after expiry,
a lost race (409) is just 'not leader'."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from controller.kubeapi.client import Api
from controller.process.lease import LeaderElector
from localcluster import Cluster, Kube


@pytest_asyncio.fixture
async def api(cluster: Cluster, kube: Kube) -> AsyncIterator[Api]:
    kube.ensure_namespace("compactor-system")
    client = await Api.connect(str(cluster.kubeconfig))
    yield client
    await client.close()


@pytest.mark.asyncio
async def test_one_leader_then_takeover_after_expiry(api: Api) -> None:
    name = f"lease-{uuid.uuid4().hex[:6]}"
    now = [datetime.datetime.now(datetime.UTC)]
    a = LeaderElector(api, "compactor-system", name, "a", lease_seconds=15,
                      clock=lambda: now[0])
    b = LeaderElector(api, "compactor-system", name, "b", lease_seconds=15,
                      clock=lambda: now[0])
    assert await a.step() is True
    assert await b.step() is False
    assert await a.step() is True  # renews
    now[0] += datetime.timedelta(seconds=16)  # a stopped renewing
    assert await b.step() is True
    assert await a.step() is False
    lease = await api.get(f"/apis/coordination.k8s.io/v1/namespaces/compactor-system/leases/"
                          f"{name}")
    assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1


@pytest.mark.asyncio
async def test_simultaneous_candidates_never_both_lead(api: Api) -> None:
    name = f"race-{uuid.uuid4().hex[:6]}"
    electors = [LeaderElector(api, "compactor-system", name, f"c{i}") for i in range(5)]
    assert await electors[0].step()
    await electors[0].release()
    # Released: everyone races for it; optimistic concurrency lets exactly one win.
    results = await asyncio.gather(*(e.step() for e in electors))
    assert sum(results) == 1


@pytest.mark.asyncio
async def test_renewal_costs_one_write_per_third_of_the_lease_however_often_asked(
        api: Api) -> None:
    name = f"cost-{uuid.uuid4().hex[:6]}"
    now = [datetime.datetime.now(datetime.UTC)]
    elector = LeaderElector(api, "compactor-system", name, "a", lease_seconds=15,
                            clock=lambda: now[0])
    assert await elector.step()
    before = api.requests
    for _ in range(10):  # passes in quick succession ask again and again
        now[0] += datetime.timedelta(seconds=0.4)
        assert await elector.step()
    assert api.requests == before, "no request within a third of the lease"
    now[0] += datetime.timedelta(seconds=5)
    assert await elector.step()
    assert api.requests == before + 1, "one PUT with the held resourceVersion, no GET"
