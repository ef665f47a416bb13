"""Manager watches with the API replaced by a scripted stand-in (the boundary under test):
an expired watch (410) relists and goes on, and events wake the reconciler."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controller.api import ApiError
from controller.manager import Manager, ManagerSettings


class ScriptedApi:
    def __init__(self) -> None:
        self.lists = 0
        self.watches = 0

    async def list(self, path: str, label_selector: str | None = None) -> tuple[list[Any], str]:
        self.lists += 1
        return [], str(self.lists)

    async def watch(self, path: str, resource_version: str) -> AsyncIterator[tuple[str, Any]]:
        self.watches += 1
        if self.watches == 1:
            raise ApiError(410, "Expired", "too old resource version")
        yield "MODIFIED", {}
        await asyncio.sleep(3600)


@pytest.mark.asyncio
async def test_expired_watch_relists_and_the_next_event_wakes_the_reconciler() -> None:
    api = ScriptedApi()
    manager = Manager(api, ManagerSettings(certs=None), reconciler=None)  # type: ignore[arg-type]
    stop = asyncio.Event()
    task = asyncio.create_task(manager._watch("/api/v1/nodes", stop))
    await asyncio.wait_for(manager.wake.wait(), 5)
    assert api.lists == 2 and api.watches == 2  # listed again after the 410
    stop.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
