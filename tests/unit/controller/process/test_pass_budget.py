"""How long a pass writes before it leaves Pod patches to the next (pure), and the pass's
phases timed on a whole ``Reconciler`` whose HTTP client is a stand-in (the boundary under
test is the pass: read, plan, write, each observed once)."""

from __future__ import annotations

from typing import cast

import pytest
from kubernetes_asyncio.client import ApiClient

from controller.components.pod_settings import RuntimeSettings
from controller.kubeapi.client import Api
from controller.process.reconciler import WRITE_PER_PLAN, Reconciler, write_budget
from tests.unit.controller.process.test_reconciler import NOW, _Client


def test_a_quick_plan_leaves_the_configured_budget() -> None:
    assert write_budget(4.0, 0.5) == 4.0


def test_a_plan_longer_than_the_budget_still_leaves_time_to_write() -> None:
    """At 150,000 Pods the plan alone outlasts 4 s: counted from the pass's start, the budget
    left no Pod patch to start, and every pass deferred them all."""
    assert write_budget(4.0, 6.0) == WRITE_PER_PLAN * 6.0
    assert write_budget(4.0, 6.0) / (write_budget(4.0, 6.0) + 6.0) >= 0.75


@pytest.mark.asyncio
async def test_each_pass_observes_its_read_plan_and_write_stand_in_http() -> None:
    reconciler = Reconciler(Api(cast(ApiClient, _Client({}))), RuntimeSettings(),
                            clock=lambda: NOW, pass_budget=4.0)
    await reconciler.reconcile()
    await reconciler.reconcile()
    registry = reconciler.metrics.registry
    for phase in ("read", "plan", "write"):
        assert registry.get_sample_value("compactor_reconcile_phase_duration_seconds_count",
                                         {"phase": phase}) == 2
    assert registry.get_sample_value("compactor_plan_duration_seconds_count") == 2
