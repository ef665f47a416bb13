"""Policy status: what the controller observed, as conditions a person can read. Pure."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from compaction.policy import Policy, SchedulerMode
from compaction.problem import Problem
from controller.plan.scheduler_routing import Routing, SchedulerHealth
from controller.snapshot.fields import format_time
from controller.snapshot.owner import OwnerInfo


@dataclass(frozen=True)
class Condition:
    type: str
    status: bool
    reason: str
    message: str


def _now() -> str:
    return format_time(datetime.datetime.now(datetime.UTC))


def render_conditions(conditions: Sequence[Condition], previous: Sequence[Mapping[str, Any]],
                      generation: int, now: str | None = None) -> list[dict[str, Any]]:
    """Conditions in the API's shape; lastTransitionTime moves only when the status flips."""
    before = {c.get("type"): c for c in previous}
    out = []
    for c in conditions:
        status = "True" if c.status else "False"
        old = before.get(c.type)
        since = (old.get("lastTransitionTime") if old and old.get("status") == status
                 else None) or now or _now()
        out.append({"type": c.type, "status": status, "reason": c.reason,
                    "message": c.message, "observedGeneration": generation,
                    "lastTransitionTime": since})
    return out


def invalid_conditions(problems: Sequence[Problem]) -> list[Condition]:
    message = "; ".join(map(str, problems))[:2000]
    return [Condition("Valid", False, "InvalidSpec", message),
            Condition("SchedulerReady", False, "InvalidSpec", "policy is invalid"),
            Condition("DeschedulerReady", False, "InvalidSpec", "policy is invalid")]


def kept_conditions(problems: Sequence[Problem], generation: int) -> Condition:
    """``Valid`` of a policy whose spec turned invalid after it was valid: it goes on acting
    on the spec it was valid with."""
    message = "; ".join(map(str, problems))[:1800]
    return Condition("Valid", False, "InvalidSpec",
                     f"{message}; acting on the last valid spec (generation {generation}) "
                     "until this is fixed")


def policy_conditions(policy: Policy, scheduler: SchedulerHealth,
                      recovery: datetime.timedelta, pool_nodes: int | None, managed: int,
                      failed_run: OwnerInfo | None = None) -> list[Condition]:
    """``scheduler``: the compaction scheduler's health (its reason is the condition's);
    ``pool_nodes``: how many nodes the descheduler's pool holds; None while its CronJob has
    not been created; ``failed_run``: the descheduler's last finished Job, if it failed
    (``controller.components.descheduler.failed_run``)."""
    valid = Condition("Valid", True, "Valid", "spec is valid")
    mode = policy.scheduler.mode
    if not policy.enabled:
        return [valid, Condition("SchedulerReady", True, "Disabled", "policy is disabled"),
                Condition("DeschedulerReady", True, "Disabled", "policy is disabled")]
    if mode is SchedulerMode.MANAGED:
        sched = Condition("SchedulerReady", scheduler.routing is Routing.AVAILABLE,
                          scheduler.routing.value, scheduler.message(recovery))
    elif mode is SchedulerMode.EXTERNAL:
        sched = Condition("SchedulerReady", True, "External",
                          f"Pods target {policy.scheduler.external_scheduler_name}; "
                          "not managed by Compactor")
    else:
        sched = Condition("SchedulerReady", True, "NotRequired", "descheduler-only compaction")
    if not policy.descheduler.enabled:
        desched = Condition("DeschedulerReady", True, "Disabled", "descheduler is disabled")
    elif pool_nodes is None:
        desched = Condition("DeschedulerReady", False, "Progressing",
                            "descheduler CronJob not created yet")
    elif pool_nodes == 0:
        desched = Condition("DeschedulerReady", False, "NoMatchingNodes",
                            "no node matches spec.descheduler.nodeSelector "
                            f"({policy.descheduler.node_selector.render()}); "
                            "the CronJob is suspended until one does")
    elif failed_run is not None:
        desched = Condition("DeschedulerReady", False, "RunFailed", run_failed_message(
            failed_run))
    elif managed == 0:
        desched = Condition("DeschedulerReady", True, "Suspended",
                            "no managed workloads; the CronJob is suspended")
    else:
        desched = Condition("DeschedulerReady", True, "Scheduled",
                            f"runs on {policy.descheduler.interval!r}")
    return [valid, sched, desched]


def run_failed_message(job: OwnerInfo) -> str:
    """What a failed descheduler run says, and where its cause is written: the Pod's log
    (a permission it lacks is named there, as the API server refused it)."""
    return (f"the last descheduler run, Job {job.namespace}/{job.name}, failed: {job.failure}; "
            f"its log says why: kubectl logs -n {job.namespace} job/{job.name}")


def status_body(policy_enabled: bool, scheduler_name: str | None, mode: str | None,
                managed: int, generation: int, conditions: list[dict[str, Any]]
                ) -> dict[str, Any]:
    status: dict[str, Any] = {
        "observedGeneration": generation, "enabled": policy_enabled,
        "managedWorkloads": managed, "conditions": conditions,
    }
    status["schedulerName"] = scheduler_name or ""
    if mode:
        status["schedulerMode"] = mode
    return status


def same_status(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Equal as JSON (tuples and lists alike), so an unchanged status is not rewritten."""
    return orjson.dumps(dict(old), option=orjson.OPT_SORT_KEYS) == orjson.dumps(
        dict(new), option=orjson.OPT_SORT_KEYS)
