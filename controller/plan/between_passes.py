"""What the controller remembers between passes, in this process only. Pure.

Nothing here must survive a restart: loop-detection state lives in the workload's
annotation. A restarted controller forgets a disruption budget's back-off (it asks again),
its wait for an eviction to show in the watch cache (the cache has caught up by then), and
what it applied (it applies once more).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from controller.drain_planner.memo import DrainMemo
from controller.plan.landings import Landings

PDB_BACKOFF: Final = datetime.timedelta(seconds=30)
# How long an eviction may stay unseen in the Pods a pass reads before it stops waiting.
EXPECTATION: Final = datetime.timedelta(seconds=60)
# The same event about the same object at most this often.
EVENT_INTERVAL: Final = datetime.timedelta(hours=1)


@dataclass(frozen=True)
class Expectation:
    pod_uid: str
    at: datetime.datetime


@dataclass(frozen=True)
class Memory:
    # workload path -> until when a PodDisruptionBudget said no
    backoff: Mapping[str, datetime.datetime] = field(default_factory=dict)
    # workload path -> the Pod it last evicted, not yet gone from the watch cache
    evicted: Mapping[str, Expectation] = field(default_factory=dict)
    # own object path -> (digest applied, its generation or resourceVersion after the apply)
    applied: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # event key -> when it was last recorded (events that repeat are rate-limited)
    events: Mapping[str, datetime.datetime] = field(default_factory=dict)
    # the last drain plans, reused while what they were computed from is unchanged
    drains: DrainMemo | None = None
    # the Pods the drains marked, and where their replacements landed
    landings: Landings = field(default_factory=Landings)

    def recently(self, event: str, now: datetime.datetime) -> bool:
        at = self.events.get(event)
        return at is not None and now - at < EVENT_INTERVAL

    def noted(self, event: str, now: datetime.datetime) -> Memory:
        return replace(self, events={**self.events, event: now})

    def backing_off(self, workload: str, now: datetime.datetime) -> bool:
        until = self.backoff.get(workload)
        return until is not None and now < until

    def awaiting(self, workload: str, pod_uids: Iterable[str], now: datetime.datetime) -> bool:
        """The last eviction is not visible yet in the Pods read (a watch cache a moment
        behind): the workload is not settled, whatever the count says."""
        expected = self.evicted.get(workload)
        return (expected is not None and now - expected.at < EXPECTATION
                and expected.pod_uid in set(pod_uids))

    def blocked(self, workload: str, now: datetime.datetime) -> Memory:
        return replace(self, backoff={**self.backoff, workload: now + PDB_BACKOFF})

    def evicting(self, workload: str, pod_uid: str, now: datetime.datetime) -> Memory:
        return replace(self, evicted={**self.evicted, workload: Expectation(pod_uid, now)})

    def planned(self, drains: DrainMemo | None, landings: Landings | None = None) -> Memory:
        return replace(self, drains=drains, landings=landings or self.landings)

    def wrote(self, path: str, digest: str, revision: str) -> Memory:
        return replace(self, applied={**self.applied, path: (digest, revision)})

    def pruned(self, present_pod_uids: set[str], now: datetime.datetime) -> Memory:
        """Without the back-offs that ended and the expectations that were met or expired."""
        return replace(
            self,
            backoff={k: v for k, v in self.backoff.items() if now < v},
            evicted={k: e for k, e in self.evicted.items()
                     if now - e.at < EXPECTATION and e.pod_uid in present_pod_uids},
            events={k: t for k, t in self.events.items() if now - t < EVENT_INTERVAL})
