"""The status of each policy and of the PolicyEvaluation, as this pass saw them. Pure."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any, Final

from compaction import kinds, names
from compaction.evaluation import KNOWN_TYPES, default_manifest
from controller.drain_planner.drain_plan import DrainPlan
from controller.plan import last_valid_spec
from controller.plan.actions import (
    Create,
    WriteStatus,
)
from controller.plan.between_passes import Memory
from controller.plan.draft import Draft
from controller.plan.landings import Landings, Outcome
from controller.plan.scheduler_routing import SchedulerHealth
from controller.plan.settings import PlanSettings
from controller.plan.status import (
    Condition,
    invalid_conditions,
    policy_conditions,
    render_conditions,
    same_status,
    status_body,
)
from controller.snapshot.fields import format_time
from controller.snapshot.owner import OwnerInfo
from controller.snapshot.policies import EvaluationInfo, PolicyInfo


def _plan_status(d: DrainPlan, landed: Mapping[Outcome, int]) -> dict[str, Any]:
    return {"landings": {_LANDING_KEYS[o]: n for o, n in landed.items()},
            "nodesInUse": len(d.nodes_in_use), "freeable": len(d.freeable),
            "draining": len(d.draining), "freeableNodes": list(d.freeable),
            # A list, not a map: a merge patch replaces a list, and never drops a map's keys.
            "evictionsToFree": [{"node": n, "evictions": d.costs[n]} for n in d.freeable
                                if n in d.costs],
            "drainingNodes": list(d.draining),
            "unremovable": [{"node": u.node, "reasons": [r.text for r in u.reasons]}
                            for u in (*d.abandoned, *d.unremovable)][:50]}


# Where the replacements of the Pods the policy's drains evicted landed, since the controller
# started: as the plan said, on another node it keeps, on a node it counted as free.
_LANDING_KEYS: Final = {Outcome.PLANNED: "plannedNode", Outcome.KEPT: "keptNode",
                        Outcome.FREE: "freeNode"}


def policy_status(policies: Iterable[PolicyInfo], managed: Mapping[str, int],
                  health: SchedulerHealth, settings: PlanSettings,
                  pools: Mapping[str, int], drains: Mapping[str, DrainPlan],
                  failed_runs: Mapping[str, OwnerInfo], memory: Memory,
                  now: datetime.datetime, out: Draft, landings: Landings) -> None:
    """Each policy's status. A valid one keeps its spec there as the last valid one; one
    that turned invalid acts on that (say its conditions, with an Event per bad edit), so
    that a bad edit never tears down what the policy set up."""
    stamp = format_time(now)
    for obj in policies:
        previous = obj.status.get("conditions") or []
        policy = obj.acting
        if policy is None:
            conditions = invalid_conditions(obj.problems)
            body = status_body(False, None, None, 0, obj.generation,
                               render_conditions(conditions, previous, obj.generation, stamp))
        else:
            count = managed.get(obj.id, 0)
            conditions = policy_conditions(policy, health, settings.scheduler_recovery,
                                           pools.get(obj.id), count, failed_runs.get(obj.id))
            if obj.policy is None:
                conditions[0], events = last_valid_spec.kept(obj, memory, now)
                out.actions += events
            body = status_body(policy.enabled, policy.scheduler.scheduler_name,
                               policy.scheduler.mode.value, count, obj.generation,
                               render_conditions(conditions, previous, obj.generation, stamp))
            body.update(last_valid_spec.status_fields(obj))
            if obj.id in drains:
                body["plan"] = _plan_status(drains[obj.id], landings.of(obj.id))
        if not same_status(obj.status, body):
            out.actions.append(WriteStatus(obj.status_path, body))


def evaluation_status(present: EvaluationInfo | None, settings: PlanSettings,
                      now: datetime.datetime, out: Draft) -> None:
    """The default PolicyEvaluation while none exists (created, never overwritten), and the
    status of the one that does: its types, known and unknown, and whether it is valid."""
    if present is None:
        if settings.default_evaluation:
            out.actions.append(Create(kinds.kind(names.EVALUATION_KIND).path(),
                                      default_manifest()))
        return
    e = present.evaluation
    valid = (Condition("Valid", False, "InvalidSpec",
                       "; ".join(map(str, present.problems))[:2000] + "; the rest is used")
             if present.problems else
             Condition("Valid", True, "Valid",
                       "precedence is valid" + (f"; not implemented by Compactor, so ranking "
                                                f"nothing: {', '.join(e.unknown)}"
                                                if e.unknown else "")))
    stamp = format_time(now)
    body = {"observedGeneration": e.generation,
            # Every type Compactor ranks, with the priority in force (the default when the
            # object leaves it out).
            "knownTypes": [{"type": t, "priority": e.priority(t),
                            "source": "spec" if t in e.known else "default"}
                           for t in KNOWN_TYPES],
            "unknownTypes": list(e.unknown),
            "conditions": render_conditions([valid], present.status.get("conditions") or [],
                                            e.generation, stamp)}
    if not same_status(present.status, body):
        out.actions.append(WriteStatus(kinds.kind(names.EVALUATION_KIND).path(
            name=names.EVALUATION_NAME, subresource="status"), body))
