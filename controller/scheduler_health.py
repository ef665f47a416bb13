"""Whether new Pods may be sent to the compaction scheduler now. Pure.

A Pod's ``schedulerName`` never changes: one sent to a scheduler that does not run waits
for ever, and no autoscaler, budget or alert frees it. So the intent names the compaction
scheduler only while it can schedule: its Deployment has an available replica, or was
created within ``down_after`` (it is starting). Once it has had none for ``down_after``
(an image that cannot be pulled, a crash loop, its node gone), the intent falls back to the
default scheduler; it routes to the compaction scheduler again once that has been available
for ``recovery``, so that one that flaps does not take Pods with it. Whether the last passes
fell back is read from the policies' status (their ``SchedulerReady`` reason), so a
restarted controller goes on where the last one was. Why its Pods do not run (an image that
cannot be pulled, a crash loop), as the kubelet says, goes into the message: a condition that
only said "no available replica" would send the operator looking.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final

from controller.objects import format_time
from controller.snapshot import OwnObject, PodInfo

# The labels of the compaction scheduler's Pods (controller.scheduler_objects).
POD_LABELS: Final = {"app.kubernetes.io/name": "compactor",
                     "app.kubernetes.io/component": "scheduler"}

DOWN_AFTER: Final = datetime.timedelta(seconds=30)
RECOVERY: Final = datetime.timedelta(seconds=60)
# Pods left Pending on the missing scheduler this long are replaced (see plan.py).
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
                   and all(p.labels.get(k) == v for k, v in POD_LABELS.items()))
    return f"Pod {stuck[0][0]} cannot start: {stuck[0][1]}" if stuck else ""


def judge(deployment: OwnObject | None, fell_back: bool, now: datetime.datetime,
          down_after: datetime.timedelta = DOWN_AFTER,
          recovery: datetime.timedelta = RECOVERY, cause: str = "") -> SchedulerHealth:
    """``deployment``: the scheduler's, as read (None: not created yet); ``fell_back``:
    whether the last pass sent new Pods to the default scheduler; ``cause``: ``pod_cause``
    of its Pods, carried into the message."""
    return replace(_judge(deployment, fell_back, now, down_after, recovery), cause=cause)


def _judge(deployment: OwnObject | None, fell_back: bool, now: datetime.datetime,
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
