"""What a pass asks of the API server when nothing changed, with the API replaced by a
recorder (the boundary under test): no DELETE of what is already gone, no version probe
every pass."""

from __future__ import annotations

from typing import Any

import pytest

from controller.reconciler import POLICIES, Reconciler
from controller.runtime import load

POLICY = {"apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
          "metadata": {"name": "p", "uid": "u", "generation": 1,
                       "creationTimestamp": "2026-01-01T00:00:00Z"},
          "spec": {}}


class RecordingApi:
    def __init__(self) -> None:
        self.policies: list[dict[str, Any]] = []
        self.calls: list[tuple[str, str]] = []

    async def list(self, path: str, label_selector: str | None = None
                   ) -> tuple[list[dict[str, Any]], str]:
        self.calls.append(("list", path))
        return (list(self.policies) if path == POLICIES else []), "1"

    async def delete(self, path: str) -> bool:
        self.calls.append(("delete", path))
        return False

    async def apply(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("apply", path))
        return obj

    async def patch(self, path: str, patch: Any, kind: str = "merge") -> dict[str, Any]:
        self.calls.append(("patch", path))
        return {}

    async def version(self) -> str:
        self.calls.append(("version", ""))
        return "v1.36.3"

    def made(self, verb: str) -> int:
        return sum(1 for v, _ in self.calls if v == verb)


@pytest.mark.asyncio
async def test_reconciler_with_a_recording_api_deletes_the_scheduler_once() -> None:
    api = RecordingApi()
    reconciler = Reconciler(api, load({}))  # type: ignore[arg-type]
    await reconciler.reconcile()
    assert api.made("delete") == 2  # the scheduler's Deployment and ConfigMap
    api.calls.clear()
    await reconciler.reconcile()
    assert api.made("delete") == 0


@pytest.mark.asyncio
async def test_reconciler_with_a_recording_api_asks_the_version_once_while_it_lasts() -> None:
    api = RecordingApi()
    api.policies = [POLICY]
    reconciler = Reconciler(api, load({}))  # type: ignore[arg-type]
    await reconciler.reconcile()
    await reconciler.reconcile()
    assert api.made("version") == 1
    # The last policy goes: both scheduler objects are deleted, once; it comes back: applied.
    api.policies = []
    await reconciler.reconcile()
    await reconciler.reconcile()
    assert api.made("delete") == 2
    api.policies = [POLICY]
    api.calls.clear()
    await reconciler.reconcile()
    assert ("apply", "/apis/apps/v1/namespaces/compactor-system/deployments/"
            "compactor-scheduler") in api.calls
