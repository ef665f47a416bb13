"""The runtime hook reads Pods from a watch cache that may be a moment behind its own
evictions. With the API replaced by a recorder (the boundary under test), a Pod it has just
evicted but still sees as Running must hold the next eviction back."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from compaction.intent import intent_for
from compaction.policy import parse_policy
from compaction.workload import WorkloadType
from controller.metrics import ControllerMetrics
from controller.runtime_hook import RuntimeHook
from controller.workloads import workload_object

POLICY = parse_policy({
    "apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
    "metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"setLabelsByEviction": True}})
_WORKLOAD = workload_object(WorkloadType.DEPLOYMENT, {
    "metadata": {"namespace": "shop", "name": "web", "uid": "w1"},
    "spec": {"replicas": 2}}, {})
assert _WORKLOAD is not None
WORKLOAD = _WORKLOAD


def pod(name: str, scheduler: str = "default-scheduler") -> dict[str, Any]:
    return {"metadata": {"namespace": "shop", "name": name, "uid": f"uid-{name}"},
            "spec": {"nodeName": "n1", "schedulerName": scheduler},
            "status": {"phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True"}]}}


class RecordingApi:
    def __init__(self) -> None:
        self.evictions: list[str] = []

    async def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        if path.endswith("/eviction"):
            self.evictions.append(path.split("/")[-2])
        return obj

    async def patch(self, path: str, patch: Any, kind: str = "merge") -> dict[str, Any]:
        return {}


@pytest.mark.asyncio
async def test_hook_with_a_recording_api_waits_until_its_eviction_shows_in_the_cache() -> None:
    api = RecordingApi()
    hook = RuntimeHook(api, ControllerMetrics(),  # type: ignore[arg-type]
                       intent_grace=datetime.timedelta(0))
    selector = POLICY.descheduler.node_selector
    stale = [pod("a"), pod("b")]
    await hook.step(WORKLOAD, POLICY, stale, {"n1": {}}, selector)
    assert api.evictions == ["a"]
    # The cache has not seen the eviction yet: both Pods still look Running and Ready.
    await hook.step(WORKLOAD, POLICY, stale, {"n1": {}}, selector)
    assert api.evictions == ["a"]
    # Now it has: "a" is gone and its replacement runs compliant; "b" is next.
    fresh = [pod("a2", "compactor-scheduler"), pod("b")]
    intent = intent_for(POLICY, WorkloadType.DEPLOYMENT)
    fresh[0]["metadata"].update(labels=dict(intent.labels),
                                annotations={"compactor.dev/intent": intent.render()})
    await hook.step(WORKLOAD, POLICY, fresh, {"n1": {}}, selector)
    assert api.evictions == ["a", "b"]
