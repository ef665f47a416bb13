"""What a pass decided to do, as typed actions; ``controller.act.executor`` carries them out.

A plan holds its actions in the order they run. Follow-ups (``then``) run only after the
action they belong to succeeded: an Event after the patch it reports, the state saved after
an eviction went through. Each action names in ``tolerate`` the HTTP answers that mean
"nothing to do any more" rather than a failure; the executor reads them from there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from compaction import kinds
from compaction.problem import Problem
from controller.drain_planner.drain_plan import DrainPlan
from controller.drain_planner.memo import DrainMemo
from controller.plan.landings import Landings, Outcome


class Target(StrEnum):
    """What a patch writes, for the pass's counts and metrics."""

    WORKLOAD = "workload"
    POD = "pod"
    STALE_COPY = "stale_copy"
    STATE = "state"
    NODE = "node"  # the drain taint, nothing else


@dataclass(frozen=True)
class Patch:
    path: str
    body: Any
    target: Target
    patch_type: Literal["merge", "json"] = "merge"
    # Answers that mean "nothing to do any more": 404 gone; for a guarded JSON patch, 422 too
    # (its test failed: the object changed since it was read).
    tolerate: frozenset[int] = frozenset({404})
    then: tuple[Action, ...] = ()


@dataclass(frozen=True)
class Apply:
    """Server-side apply of one of our own objects; ``digest`` identifies what is applied."""

    path: str
    body: Mapping[str, Any]
    digest: str
    tolerate: frozenset[int] = frozenset()  # an apply that did not happen is a failure


@dataclass(frozen=True)
class Create:
    """Create an object only if absent: a 409 (someone made it meanwhile) is no error, and
    what exists is never overwritten."""

    path: str  # the collection
    body: Mapping[str, Any]
    tolerate: frozenset[int] = frozenset({409})  # it exists: never overwritten


@dataclass(frozen=True)
class Delete:
    path: str
    tolerate: frozenset[int] = frozenset({404})  # gone already


class EvictPurpose(StrEnum):
    """Why the controller evicts (the value is a metric label)."""

    RUNTIME_HOOK = "runtime_hook"  # a Pod that missed its admission state is replaced
    STRANDED = "stranded"  # a Pod left Pending on a compaction scheduler that cannot run


@dataclass(frozen=True)
class Evict:
    """An eviction through the Eviction API (PodDisruptionBudgets decide) of the Pod with
    ``pod_uid`` only: a StatefulSet's replacement Pod has the same name and another uid."""

    namespace: str
    name: str
    pod_uid: str
    workload: str  # the workload's path: the key of its backoff and expectation
    # 404: the Pod is gone; 409: its uid precondition failed, so the Pod aimed at is gone and
    # another took its name. (A 429 is a disruption budget saying no: a back-off, not this.)
    tolerate: frozenset[int] = frozenset({404, 409})
    then: tuple[Action, ...] = ()
    purpose: EvictPurpose = EvictPurpose.RUNTIME_HOOK

    @property
    def path(self) -> str:
        return kinds.kind("Pod").path(self.namespace, self.name, "eviction")

    @property
    def body(self) -> dict[str, Any]:
        return {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "deleteOptions": {"preconditions": {"uid": self.pod_uid}}}


@dataclass(frozen=True)
class RecordEvent:
    """Best effort: an Event that cannot be recorded is logged, never a failure of the pass,
    whatever the answer (so it carries no ``tolerate``)."""

    namespace: str
    body: Mapping[str, Any]
    key: str = ""  # set: an event the executor remembers, so that it repeats at most hourly
    # Set: the name of the Event this one says again (same object, reason and message): the
    # executor moves that Event's count and lastTimestamp (``again``), as client-go's recorder
    # does, and creates ``body`` only if it is gone.
    repeats: str = ""

    @property
    def again(self) -> dict[str, Any]:
        """The merge patch that says a repeated Event once more."""
        return {"count": self.body.get("count"), "lastTimestamp": self.body.get("lastTimestamp")}


@dataclass(frozen=True)
class WriteStatus:
    path: str
    status: Mapping[str, Any]
    tolerate: frozenset[int] = frozenset({404})  # the policy was deleted meanwhile


Action = Patch | Apply | Create | Delete | Evict | RecordEvent | WriteStatus


@dataclass(frozen=True)
class Plan:
    actions: tuple[Action, ...] = ()
    managed: Mapping[str, int] = field(default_factory=dict)  # policy -> workloads
    invalid: Mapping[str, list[Problem]] = field(default_factory=dict)
    suppressed: int = 0  # workloads suppressed after this pass
    suppressions: int = 0  # of them, suppressed by this pass
    skipped_evictions: int = 0  # Pods the hook would replace but may not
    drains: tuple[DrainPlan, ...] = ()  # the planner's plan, per active policy
    # One line per workload whose winning policy changes: winner, strongest loser, the rule.
    selections: tuple[str, ...] = ()
    # Resource plans found blocked (first seen, or again after an hour), by reason.
    resources_blocked: Mapping[str, int] = field(default_factory=dict)
    drain_memo: DrainMemo | None = None  # for the next pass's plan to reuse
    # Where new Pods of managed-scheduler policies go: the SchedulerReady reason
    # (controller.plan.scheduler_routing.Routing), and how many stranded Pods this pass replaces.
    scheduler_routing: str = "Available"
    stranded: int = 0
    # Where the replacements of evicted Pods landed this pass (policy, outcome), and what the
    # next pass follows from.
    landed: tuple[tuple[str, Outcome], ...] = ()
    landings: Landings | None = None
    # Pods Compactor may not evict now, by reason code: a workload's eviction budget
    # (eviction_budget) or a recent replacement (recently_replaced).
    held: Mapping[str, int] = field(default_factory=dict)

    def of(self, kind: type[Any]) -> list[Any]:
        """The actions of one type, in order (for tests and logs)."""
        return [a for a in self.actions if isinstance(a, kind)]
