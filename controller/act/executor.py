"""Carries out a ``Plan`` through the API, in order, and counts what it did.

The rules of writing live here: an answer the action says it tolerates (its ``tolerate``:
404 gone, 422 for a guarded patch whose test failed, 409 for an eviction whose Pod was
replaced under the same name) is no error; a 429 on an eviction is a PodDisruptionBudget
saying no, which backs that workload off; any other failure is reported in the pass's errors
and costs nothing but one more pass. Follow-ups of an action run only after it succeeded.

A run of metadata patches of one target (the Pods of every workload, say) has no order among
its members, so it runs ``concurrency`` at a time: the API server's priority and fairness
queues them, and a 429 is waited out by ``controller.kubeapi.client``. Pod patches not started by a
pass's deadline are left to the next pass, which the summary asks for at once, so that no
pass holds the controller for long while thousands of Pods converge.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from compaction import kinds
from compaction.problem import Problem
from controller.act.metrics import ControllerMetrics
from controller.kubeapi.client import ApiError, Obj, WriteApi
from controller.plan.actions import (
    Action,
    Apply,
    Create,
    Delete,
    Evict,
    EvictPurpose,
    Patch,
    Plan,
    RecordEvent,
    Target,
    WriteStatus,
)
from controller.plan.between_passes import Memory
from controller.snapshot.fields import revision

# Metadata patches in flight at once: well inside the share API Priority and Fairness gives a
# service account's level, and enough to label 15,000 Pods within a minute.
PATCH_CONCURRENCY: Final = 8

log = logging.getLogger("compactor.controller")
# Targets whose patches are independent of one another: concurrent within a run of one target.
_CONCURRENT: Final = frozenset({Target.POD, Target.WORKLOAD, Target.STALE_COPY})


@dataclass
class Summary:
    workloads_patched: int = 0
    pods_patched: int = 0
    deferred: int = 0  # Pod patches left to the next pass (the budget was spent)
    managed: dict[str, int] = field(default_factory=dict)
    invalid: dict[str, list[Problem]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def independent(action: Action) -> bool:
    """A patch whose outcome nothing else in the plan waits for and whose follow-ups change
    nothing the executor remembers: it may run beside others of its target."""
    return (isinstance(action, Patch) and action.target in _CONCURRENT
            and all(isinstance(t, RecordEvent) and not t.key for t in action.then))


def batches(actions: Iterable[Action]) -> list[Sequence[Action]]:
    """The actions in order, consecutive independent patches of one target grouped."""
    out: list[list[Action]] = []
    for action in actions:
        last = out[-1][-1] if out else None
        if (last is not None and independent(action) and independent(last)
                and isinstance(action, Patch) and isinstance(last, Patch)
                and action.target is last.target):
            out[-1].append(action)
        else:
            out.append([action])
    return list(out)


class Executor:
    def __init__(self, api: WriteApi, metrics: ControllerMetrics,
                 concurrency: int = PATCH_CONCURRENCY,
                 clock: Callable[[], float] = time.monotonic,
                 observe: Callable[[Obj], None] | None = None) -> None:
        """``observe`` is handed every object a write answered with (the watch caches keep
        it, so the next pass never plans from the state before this write)."""
        self.api, self.metrics = api, metrics
        self.observe = observe or (lambda _: None)
        self.concurrency, self.clock = max(1, concurrency), clock

    async def execute(self, plan: Plan, memory: Memory, now: datetime.datetime,
                      deadline: float | None = None) -> tuple[Summary, Memory]:
        """``deadline`` (on ``clock``): no Pod patch starts after it."""
        summary = Summary(managed=dict(plan.managed), invalid=dict(plan.invalid))
        for line in plan.selections:
            log.info("selection summary: %s", line)
        for batch in batches(plan.actions):
            if len(batch) == 1:
                memory = await self._one(batch[0], summary, memory, now)
            else:
                await self._concurrently(batch, summary, memory, now, deadline)
        self.metrics.suppressed.set(plan.suppressed)
        self.metrics.suppressions.inc(plan.suppressions)
        self.metrics.evictions.labels("skipped").inc(plan.skipped_evictions)
        self.metrics.show_plans(plan.drains)
        self.metrics.show_held(plan.held)
        for _, outcome in plan.landed:
            self.metrics.landings.labels(outcome.value).inc()
        self.metrics.show_routing(plan.scheduler_routing)
        return summary, memory

    async def _concurrently(self, batch: Sequence[Action], summary: Summary, memory: Memory,
                            now: datetime.datetime, deadline: float | None) -> None:
        """Independent patches, ``concurrency`` in flight; past the deadline, Pod patches
        are counted as deferred instead of started."""
        pending = iter(batch)

        async def worker() -> None:
            for action in pending:
                if (deadline is not None and isinstance(action, Patch)
                        and action.target is Target.POD and self.clock() >= deadline):
                    summary.deferred += 1
                    continue
                await self._one(action, summary, memory, now)

        await asyncio.gather(*(worker() for _ in range(min(self.concurrency, len(batch)))))

    async def _run(self, actions: Iterable[Action], summary: Summary, memory: Memory,
                   now: datetime.datetime) -> Memory:
        for action in actions:
            memory = await self._one(action, summary, memory, now)
        return memory

    async def _one(self, action: Action, summary: Summary, memory: Memory,
                   now: datetime.datetime) -> Memory:
        try:
            if isinstance(action, Patch):
                self.observe(await self.api.patch(action.path, action.body, action.patch_type))
                if action.target is Target.WORKLOAD:
                    summary.workloads_patched += 1
                elif action.target is Target.POD:
                    summary.pods_patched += 1
                return await self._run(action.then, summary, memory, now)
            if isinstance(action, Apply):
                applied = await self.api.apply(action.path, dict(action.body))
                self.observe(applied)
                kind = str(action.body.get("kind", ""))
                return memory.wrote(action.path, action.digest, revision(kind, applied))
            if isinstance(action, Delete):
                await self.api.delete(action.path)
                return memory
            if isinstance(action, Create):
                self.observe(await self.api.create(action.path, dict(action.body)))
                log.info("created %s %s", action.body.get("kind"),
                         (action.body.get("metadata") or {}).get("name"))
                return memory
            if isinstance(action, Evict):
                return await self._evict(action, summary, memory, now)
            if isinstance(action, RecordEvent):
                recorded = await self._event(action)
                return memory.noted(action.key, now) if recorded and action.key else memory
            self.observe(await self.api.patch(action.path, {"status": dict(action.status)}))
            return memory
        except ApiError as e:
            if not isinstance(action, RecordEvent) and e.status in action.tolerate:
                return memory
            summary.errors.append(f"{_describe(action)}: {e}")
            return memory

    async def _evict(self, action: Evict, summary: Summary, memory: Memory,
                     now: datetime.datetime) -> Memory:
        ns, name = action.namespace, action.name
        try:
            await self.api.create(action.path, action.body)
        except ApiError as e:
            if e.status == 429:
                self.metrics.evictions.labels("pdb_blocked").inc()
                log.info("eviction of %s/%s blocked by a disruption budget; backing off",
                         ns, name)
                return memory.blocked(action.workload, now)
            raise
        if action.purpose is EvictPurpose.STRANDED:
            self.metrics.stranded.inc()
            log.warning("evicted %s/%s: it waited for a compaction scheduler that cannot run",
                        ns, name)
        else:
            self.metrics.evictions.labels("evicted").inc()
            log.info("evicted %s/%s to converge %s", ns, name, action.workload)
        memory = memory.evicting(action.workload, action.pod_uid, now)
        return await self._run(action.then, summary, memory, now)

    async def _event(self, action: RecordEvent) -> bool:
        """An Event said again moves its count (created anew if it is gone); a named Event
        that exists already was said (a write the caches had not shown yet)."""
        events = kinds.kind("Event")
        try:
            if action.repeats:
                try:
                    self.observe(await self.api.patch(
                        events.path(action.namespace, action.repeats), action.again))
                    return True
                except ApiError as e:
                    if e.status != 404:
                        raise
            self.observe(await self.api.create(events.path(action.namespace),
                                               dict(action.body)))
        except ApiError as e:
            # A named Event that is there was said (the API server retries a generated name
            # that is taken, so no other create answers 409).
            if e.status == 409:
                return True
            log.warning("could not record event %s: %s", action.body.get("reason"), e)
            return False
        return True


def _describe(action: Action) -> str:
    if isinstance(action, Evict):
        return f"evict {action.namespace}/{action.name}"
    if isinstance(action, RecordEvent):
        return f"event in {action.namespace}"
    verb = {Patch: "patch", Apply: "apply", Create: "create", Delete: "delete",
            WriteStatus: "status"}
    return f"{verb[type(action)]} {action.path}"
