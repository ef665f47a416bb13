"""One level-triggered pass: read a snapshot, plan with pure code, execute the plan.

Every pass starts from what the API server holds, so a restart, a lost watch (410) or a
conflicting writer (409) costs at most one more pass and never loses or duplicates work. The
only state kept between passes is ``controller.plan.between_passes``; loop-detection state lives on
the workloads themselves.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import Final

from controller.act.executor import PATCH_CONCURRENCY, Executor, Summary
from controller.act.metrics import ControllerMetrics
from controller.components.pod_settings import RuntimeSettings
from controller.kubeapi.client import Api
from controller.kubeapi.informer import Informers
from controller.plan.between_passes import Memory
from controller.plan.decide import plan
from controller.plan.settings import PlanSettings
from controller.read.reader import Reader

__all__ = ["Reconciler", "Summary"]


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


# A pass that plans for seconds (150,000 Pods) writes at least this many times as long before
# it leaves the rest of its Pod patches to the next, so that re-planning costs a labelling at
# most a quarter of its time, whatever the cluster's size.
WRITE_PER_PLAN: Final = 3.0


def write_budget(pass_budget: float, plan_seconds: float) -> float:
    """How long a pass goes on starting Pod patches, counted from its first write: the
    configured budget, or ``WRITE_PER_PLAN`` times its plan's time when that is longer (a
    budget counted from the pass's start would leave no time to write once the plan alone
    outlasted it)."""
    return max(pass_budget, WRITE_PER_PLAN * plan_seconds)


class Reconciler:
    def __init__(self, api: Api, settings: PlanSettings | RuntimeSettings,
                 metrics: ControllerMetrics | None = None,
                 informers: Informers | None = None,
                 clock: Callable[[], datetime.datetime] = _utc_now,
                 patch_concurrency: int = PATCH_CONCURRENCY,
                 pass_budget: float | None = None) -> None:
        """``settings``: what the plan reads; ``RuntimeSettings`` alone means the defaults
        for the rest."""
        self.settings = settings if isinstance(settings, PlanSettings) else \
            PlanSettings(settings)
        self.metrics = metrics or ControllerMetrics()
        self.reader = Reader(api, self.settings.namespace, informers)
        self.executor = Executor(api, self.metrics, patch_concurrency,
                                 observe=informers.observe if informers else None)
        self.pass_budget = pass_budget
        self.memory = Memory()
        self.clock = clock

    async def reconcile(self) -> Summary:
        read_at = time.perf_counter()
        snapshot = await self.reader.read()
        now = self.clock()
        started = time.perf_counter()
        self.metrics.phases.labels("read").observe(started - read_at)
        decided = plan(snapshot, self.settings, now, self.memory)
        planned = time.perf_counter() - started
        self.metrics.plan_duration.observe(planned)
        self.metrics.phases.labels("plan").observe(planned)
        for reason, count in decided.resources_blocked.items():
            self.metrics.resource_plans_blocked.labels(reason).inc(count)
        written = time.perf_counter()
        deadline = (None if self.pass_budget is None else
                    time.monotonic() + write_budget(self.pass_budget, planned))
        summary, memory = await self.executor.execute(decided, self.memory, now, deadline)
        self.metrics.phases.labels("write").observe(time.perf_counter() - written)
        self.memory = memory.pruned({p.uid for p in snapshot.pods}, now).planned(
            decided.drain_memo, decided.landings)
        return summary
