"""Whether new Pods may be sent to the compaction scheduler now. Pure.

A Pod's ``schedulerName`` never changes: one sent to a scheduler that does not run waits
for ever, and no autoscaler, budget or alert frees it. So the intent names the compaction
scheduler only while it can schedule: its Deployment has an available replica, or was
created within ``down_after`` (it is starting). Once it has had none for ``down_after``
(an image that cannot be pulled, a crash loop, its node gone), the intent falls back to the
default scheduler; it routes to the compaction scheduler again once that has been available
for ``recovery``, so that one that flaps does not take Pods with it. Whether the last passes
fell back is read from the policies' status (their ``SchedulerReady`` reason), so a
restarted controller goes on where the last one was. What follows from it in a pass is here
too: an Event when the routing changes, and the replacement of Pods left Pending on the
scheduler while it cannot schedule. Why its Pods do not run (an image that
cannot be pulled, a crash loop), as the kubelet says, goes into the message: a condition that
only said "no available replica" would send the operator looking.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final, Protocol

from compaction import names
from compaction.safety import EVICTABLE_KINDS
from controller.components.scheduler import POD_SELECTOR
from controller.plan.actions import Action, Evict, EvictPurpose
from controller.plan.events import namespaced_event, workload_event
from controller.snapshot.fields import format_time
from controller.snapshot.owned import OwnedInfo
from controller.snapshot.pod import PodInfo
from controller.snapshot.policies import PolicyInfo
from controller.snapshot.workload import WorkloadInfo

DOWN_AFTER: Final = datetime.timedelta(seconds=30)
RECOVERY: Final = datetime.timedelta(seconds=60)
# Pods left Pending on the missing scheduler this long are replaced (``stranded``).
STRANDED_AFTER: Final = datetime.timedelta(seconds=120)


class Routing(StrEnum):
    """The values are the ``SchedulerReady`` condition's reasons."""

    AVAILABLE = "Available"  # new Pods go to it
    STARTING = "Starting"  # created, not yet available: new Pods go to it, it is coming
    UNAVAILABLE = "Unavailable"  # no available replica: new Pods go to the default scheduler
    RECOVERING = "Recovering"  # available again, not yet for long: still the default one


FALLBACK: Final = frozenset({Routing.UNAVAILABLE, Routing.RECOVERING})


@dataclass(frozen=True)
class SchedulerHealth:
    routing: Routing
    since: datetime.datetime | None = None  # when the Deployment last became (un)available
    cause: str = ""  # a Pod of it the kubelet cannot start, and why (see ``pod_cause``)

    @property
    def routes(self) -> bool:
        """New Pods may be sent to the compaction scheduler."""
        return self.routing not in FALLBACK

    def message(self, recovery: datetime.timedelta) -> str:
        at = f" since {format_time(self.since)}" if self.since else ""
        cause = f"; {self.cause}" if self.cause else ""
        return {
            Routing.AVAILABLE: "compactor-scheduler is running",
            Routing.STARTING: "waiting for the compactor-scheduler Deployment to be "
                              "available",
            Routing.UNAVAILABLE: f"compactor-scheduler has no available replica{at}: new "
                                 "Pods go to the default scheduler, the runtime hook and new "
                                 "drains are paused, and Pods left Pending on it are replaced",
            Routing.RECOVERING: f"compactor-scheduler is available again{at}; new Pods go to "
                                f"it once it has been for {recovery}",
        }[self.routing] + cause


def pod_cause(pods: Iterable[PodInfo], namespace: str) -> str:
    """The first of the compaction scheduler's Pods (by name) whose container the kubelet
    holds back, as "Pod <name> cannot start: <reason>: <message>"; empty when none is. Also
    while the Deployment is available: a rollout stuck on a bad image leaves the old Pod
    running and would say nothing otherwise."""
    stuck = sorted((p.name, p.waiting) for p in pods
                   if p.namespace == namespace and p.waiting and not p.deleting
                   and all(p.labels.get(k) == v for k, v in POD_SELECTOR.items()))
    return f"Pod {stuck[0][0]} cannot start: {stuck[0][1]}" if stuck else ""


def judge(deployment: OwnedInfo | None, fell_back: bool, now: datetime.datetime,
          down_after: datetime.timedelta = DOWN_AFTER,
          recovery: datetime.timedelta = RECOVERY, cause: str = "") -> SchedulerHealth:
    """``deployment``: the scheduler's, as read (None: not created yet); ``fell_back``:
    whether the last pass sent new Pods to the default scheduler; ``cause``: ``pod_cause``
    of its Pods, carried into the message."""
    return replace(_judge(deployment, fell_back, now, down_after, recovery), cause=cause)


def _judge(deployment: OwnedInfo | None, fell_back: bool, now: datetime.datetime,
           down_after: datetime.timedelta, recovery: datetime.timedelta) -> SchedulerHealth:
    if deployment is None:
        return SchedulerHealth(Routing.UNAVAILABLE if fell_back else Routing.STARTING)
    changed = deployment.available_changed or deployment.created
    if deployment.available_replicas > 0:
        since = changed if deployment.available else None
        if fell_back and (since is None or now - since < recovery):
            return SchedulerHealth(Routing.RECOVERING, since)
        return SchedulerHealth(Routing.AVAILABLE, since)
    since = changed if deployment.available is not True else None
    if fell_back or (since is not None and now - since >= down_after):
        return SchedulerHealth(Routing.UNAVAILABLE, since)
    return SchedulerHealth(Routing.STARTING, since)


def fell_back(policies: Iterable[PolicyInfo]) -> bool:
    """Whether the last pass sent new Pods elsewhere, read from the status it wrote (so a
    restart changes nothing)."""
    return any(
        c.get("type") == "SchedulerReady" and c.get("reason") in FALLBACK
        for obj in policies for c in obj.status.get("conditions") or []
        if isinstance(c, Mapping))


def assess(policies: Iterable[PolicyInfo], deployment: OwnedInfo | None, managed: bool,
           pods: Iterable[PodInfo], namespace: str, now: datetime.datetime,
           down_after: datetime.timedelta, recovery: datetime.timedelta
           ) -> tuple[SchedulerHealth, bool]:
    """Whether new Pods may go to the compaction scheduler, and whether the last pass sent
    them elsewhere. ``deployment``: the scheduler's, as read; ``managed``: whether an active
    policy uses it; ``pods``: every Pod, to name one of the scheduler's that cannot start."""
    was = fell_back(policies)
    if deployment is None and not managed:
        return SchedulerHealth(Routing.STARTING), was  # nothing is sent to it
    return judge(deployment, was, now, down_after, recovery, pod_cause(pods, namespace)), was


def routing_events(health: SchedulerHealth, fell_back: bool, namespace: str, deployment: str,
                   recovery: datetime.timedelta) -> list[Action]:
    """An Event on the scheduler's Deployment when new Pods start going elsewhere, and when
    they go to it again."""
    if health.routes != fell_back:
        return []
    reason = "CompactionSchedulerRestored" if health.routes else \
        "CompactionSchedulerUnavailable"
    return [namespaced_event("Deployment", namespace, deployment, "", reason,
                             health.message(recovery),
                             "Normal" if health.routes else "Warning")]


class HasWorkload(Protocol):
    """A Pod's workload as the pass decided it: ``controller.plan.membership.Membership``,
    which this module cannot import (that module reaches the status, which reads this one)."""

    @property
    def workload(self) -> WorkloadInfo: ...


def stranded(pods: Iterable[PodInfo], members: Mapping[tuple[str, str], HasWorkload],
             health: SchedulerHealth, now: datetime.datetime, down_after: datetime.timedelta,
             intent_grace: datetime.timedelta, stranded_after: datetime.timedelta
             ) -> list[Evict]:
    """Pods left Pending on the compaction scheduler while it cannot schedule, for longer
    than ``stranded_after``, are replaced through the Eviction API (budgets decide), so that
    their owners recreate them with the intent in force, which names no scheduler now. Only
    Pods of the kinds the eviction table allows, and only once admission has had the intent
    grace to see the fallen-back intent."""
    if health.routing is not Routing.UNAVAILABLE:
        return []
    fell_back_at = (health.since or now) + down_after
    if now - fell_back_at < intent_grace:
        return []
    out = []
    for pod in pods:
        m = members.get(pod.key)
        if (m is None or pod.scheduler_name != names.MANAGED_SCHEDULER or not pod.unbound
                or pod.created is None
                or now - pod.created < stranded_after
                or m.workload.view.kind not in EVICTABLE_KINDS):
            continue
        out.append(Evict(pod.namespace, pod.name, pod.uid, m.workload.path, then=(
            workload_event(m.workload, "StrandedPodReplaced", (
                f"pod {pod.name} waited {now - pod.created} for {names.MANAGED_SCHEDULER}, "
                "which has no available replica; evicted so that it is recreated for the "
                "default scheduler"), "Warning"),), purpose=EvictPurpose.STRANDED))
    return out
