"""Carries out a ``Plan`` through the API, in order, and counts what it did.

The rules of writing live here: an answer an action tolerates (404 gone, 422 for a guarded
patch whose test failed) is no error; a 429 on an eviction is a PodDisruptionBudget saying
no, which backs that workload off; any other failure is reported in the pass's errors and
costs nothing but one more pass. Follow-ups of an action run only after it succeeded.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from compaction import kinds
from compaction.problem import Problem
from controller.actions import (
    Action,
    Apply,
    Create,
    Delete,
    Evict,
    Patch,
    Plan,
    RecordEvent,
    Target,
    WriteStatus,
)
from controller.api import ApiError, WriteApi
from controller.memory import Memory
from controller.metrics import ControllerMetrics
from controller.objects import revision
from controller.runtime_hook import eviction_path

log = logging.getLogger("compactor.controller")


@dataclass
class Summary:
    workloads_patched: int = 0
    pods_patched: int = 0
    managed: dict[str, int] = field(default_factory=dict)
    invalid: dict[str, list[Problem]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


class Executor:
    def __init__(self, api: WriteApi, metrics: ControllerMetrics) -> None:
        self.api, self.metrics = api, metrics

    async def execute(self, plan: Plan, memory: Memory, now: datetime.datetime
                      ) -> tuple[Summary, Memory]:
        summary = Summary(managed=dict(plan.managed), invalid=dict(plan.invalid))
        for line in plan.selections:
            log.info("selection summary: %s", line)
        memory = await self._run(plan.actions, summary, memory, now)
        self.metrics.suppressed.set(plan.suppressed)
        self.metrics.suppressions.inc(plan.suppressions)
        self.metrics.evictions.labels("skipped").inc(plan.skipped_evictions)
        self.metrics.show_plans(plan.drains)
        return summary, memory

    async def _run(self, actions: Iterable[Action], summary: Summary, memory: Memory,
                   now: datetime.datetime) -> Memory:
        for action in actions:
            memory = await self._one(action, summary, memory, now)
        return memory

    async def _one(self, action: Action, summary: Summary, memory: Memory,
                   now: datetime.datetime) -> Memory:
        try:
            if isinstance(action, Patch):
                await self.api.patch(action.path, action.body, action.patch_type)
                if action.target is Target.WORKLOAD:
                    summary.workloads_patched += 1
                elif action.target is Target.POD:
                    summary.pods_patched += 1
                return await self._run(action.then, summary, memory, now)
            if isinstance(action, Apply):
                applied = await self.api.apply(action.path, dict(action.body))
                kind = str(action.body.get("kind", ""))
                return memory.wrote(action.path, action.digest, revision(kind, applied))
            if isinstance(action, Delete):
                await self.api.delete(action.path)
                return memory
            if isinstance(action, Create):
                await self.api.create(action.path, dict(action.body))
                log.info("created %s %s", action.body.get("kind"),
                         (action.body.get("metadata") or {}).get("name"))
                return memory
            if isinstance(action, Evict):
                return await self._evict(action, summary, memory, now)
            if isinstance(action, RecordEvent):
                recorded = await self._event(action)
                return memory.noted(action.key, now) if recorded and action.key else memory
            await self.api.patch(action.path, {"status": dict(action.status)})
            return memory
        except ApiError as e:
            if isinstance(action, Patch) and e.status in action.tolerate:
                return memory
            if isinstance(action, WriteStatus) and e.status == 404:
                return memory  # the policy was deleted meanwhile
            if isinstance(action, Create) and e.status == 409:
                return memory  # it exists: never overwritten
            summary.errors.append(f"{_describe(action)}: {e}")
            return memory

    async def _evict(self, action: Evict, summary: Summary, memory: Memory,
                     now: datetime.datetime) -> Memory:
        ns, name = action.namespace, action.name
        try:
            await self.api.create(eviction_path(ns, name), {
                "apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": ns}})
        except ApiError as e:
            if e.status == 429:
                self.metrics.evictions.labels("pdb_blocked").inc()
                log.info("eviction of %s/%s blocked by a disruption budget; backing off",
                         ns, name)
                return memory.blocked(action.workload, now)
            if e.status != 404:
                raise
            return memory
        self.metrics.evictions.labels("evicted").inc()
        log.info("evicted %s/%s to converge %s", ns, name, action.workload)
        memory = memory.evicting(action.workload, action.pod_uid, now)
        return await self._run(action.then, summary, memory, now)

    async def _event(self, action: RecordEvent) -> bool:
        try:
            await self.api.create(kinds.kind("Event").path(action.namespace), dict(action.body))
        except ApiError as e:
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
