"""Admission convergence: which Pods the runtime hook may replace, and loop detection. Pure.

Loop detection counts *replacement outcomes*: a non-compliant Pod created after the hook's
last eviction for that workload is what the previous replacement turned into. Its fingerprint
is (workload, expected intent hash, observed state); the same fingerprint seen
``loopDetectionThreshold`` times within ``loopDetectionWindow`` means replacing again would
not help, so the workload is suppressed for ``suppressionDuration``. The state lives in an
annotation on the workload, so a controller restart forgets nothing.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

import orjson

from compaction import names
from compaction.intent import Intent, ParsedIntent, keeps_scheduler, parse_intent
from compaction.policy import Policy
from compaction.safety import Hold, eviction_hold
from compaction.selector import LabelSelector
from compaction.workload import WorkloadType
from controller.snapshot.fields import format_time, parse_time
from controller.snapshot.pod import PodInfo


def observed_state(pod: PodInfo) -> dict[str, Any]:
    """What admission decided and nothing later can change: the scheduler. (Labels and the
    intent annotation are patched in place, so they say nothing about the admission.)"""
    return {"schedulerName": pod.scheduler_name or names.DEFAULT_SCHEDULER}


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> ParsedIntent:
    """A workload's Pods share one annotation text: read it once per pass, not per Pod (the
    runtime hook and the drain hold both judge every Pod)."""
    return parse_intent(text)


def is_compliant(pod: PodInfo, intent: Intent,
                 exempt: frozenset[str] = names.EXEMPT_SCHEDULERS) -> bool:
    """Admitted with this intent: labels, intent hash, and the intent's scheduler unless the
    Pod kept an exempt one, as admission would keep it (``keeps_scheduler``). A Pod left on
    another scheduler (an external one the policy named before, say) is not."""
    parsed = _parsed(pod.annotations.get(names.INTENT_ANNOTATION, ""))
    if any(pod.labels.get(k) != v for k, v in intent.labels.items()) or (
            parsed.intent is None or parsed.intent.hash != intent.hash):
        return False
    return keeps_scheduler(observed_state(pod)["schedulerName"], intent.scheduler_name,
                           exempt)


def fingerprint(workload_uid: str, intent: Intent, pod: PodInfo) -> str:
    body = orjson.dumps([workload_uid, intent.hash, observed_state(pod)],
                        option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(body).hexdigest()[:16]


_HOOK_TEXT: Final = {
    Hold.PROTECTED_NAMESPACE: "protected namespace", Hold.MIRROR: "mirror pod",
    Hold.PLACEHOLDER: "placeholder", Hold.BARE_POD: "bare pod",
    Hold.SAFE_TO_EVICT: "safe-to-evict", Hold.DO_NOT_DISRUPT: "do-not-disrupt",
    Hold.SYSTEM_CRITICAL: "system critical",
    Hold.LOCAL_STORAGE: "local storage", Hold.PVC: "pvc"}


def skip_reason(pod: PodInfo, policy: Policy, node_labels: Mapping[str, str] | None,
                node_selector: LabelSelector, kind: WorkloadType,
                protected: frozenset[str] = names.PROTECTED_NAMESPACES) -> str | None:
    """Why the runtime hook must not replace this Pod of a ``kind`` workload; None when it may.

    The eviction rule of ``compaction.safety`` (the planner's and the descheduler's too), and
    ``descheduler.nodeSelector``; deliberately ignores nodeFit, the evictor's labelSelector,
    the eviction limits, the interval and the thresholds.
    """
    if pod.deleting:
        return "deleting"
    if not pod.node_name:
        return "unscheduled"
    if pod.phase != "Running":
        return "not running"
    hold = eviction_hold(pod, kind, policy.descheduler.default_evictor, protected)
    if hold is Hold.KIND_NOT_EVICTED:
        return f"{kind.value} pods are not evicted"
    if hold is not None:
        return _HOOK_TEXT[hold]
    if node_selector and (node_labels is None or not node_selector.matches(node_labels)):
        return "node outside nodeSelector"
    return None


def awaits_replacement(pod: PodInfo, intent: Intent, policy: Policy,
                       node_labels: Mapping[str, str] | None, node_selector: LabelSelector,
                       kind: WorkloadType, exempt: frozenset[str] = names.EXEMPT_SCHEDULERS,
                       protected: frozenset[str] = names.PROTECTED_NAMESPACES) -> bool:
    """A Running Pod the runtime hook would replace: admitted without the intent, and no
    skip rule holds for it."""
    return pod.phase == "Running" and not is_compliant(pod, intent, exempt) and skip_reason(
        pod, policy, node_labels, node_selector, kind, protected) is None


@dataclass(frozen=True)
class Observation:
    fingerprint: str
    at: datetime.datetime


@dataclass(frozen=True)
class ConvergenceState:
    last_eviction: datetime.datetime | None = None
    observations: tuple[Observation, ...] = ()
    counted: frozenset[str] = field(default_factory=frozenset)  # pod uids already counted
    suppressed_until: datetime.datetime | None = None
    # The intent the hook last saw on the workload, and since when: replacements wait until
    # admission (and the webhook's owner cache) can have caught up with it.
    intent_hash: str = ""
    intent_since: datetime.datetime | None = None
    # When the last eviction's replacement was seen and judged (later Pods are not it);
    # cleared by the next eviction.
    judged: datetime.datetime | None = None

    @classmethod
    def parse(cls, annotations: Mapping[str, str]) -> ConvergenceState:
        raw = annotations.get(names.CONVERGENCE_ANNOTATION)
        if not raw:
            return cls()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return cls()
        if not isinstance(body, dict):
            return cls()
        obs = tuple(Observation(str(o[0]), t) for o in body.get("obs", [])
                    if isinstance(o, list) and len(o) == 2 and (t := parse_time(o[1])))
        return cls(parse_time(body.get("lastEviction")), obs,
                   frozenset(str(u) for u in body.get("counted", [])),
                   parse_time(body.get("suppressedUntil")), str(body.get("intent", "")),
                   parse_time(body.get("intentSince")), parse_time(body.get("judged")))

    def render(self) -> str:
        body: dict[str, Any] = {}
        if self.last_eviction:
            body["lastEviction"] = format_time(self.last_eviction)
        if self.observations:
            body["obs"] = [[o.fingerprint, format_time(o.at)] for o in self.observations]
        if self.counted:
            body["counted"] = sorted(self.counted)
        if self.suppressed_until:
            body["suppressedUntil"] = format_time(self.suppressed_until)
        if self.intent_hash:
            body["intent"] = self.intent_hash
        if self.intent_since:
            body["intentSince"] = format_time(self.intent_since)
        if self.judged:
            body["judged"] = format_time(self.judged)
        return orjson.dumps(body).decode()

    def seen_intent(self, intent_hash: str, now: datetime.datetime) -> ConvergenceState:
        if self.intent_hash == intent_hash and self.intent_since:
            return self
        return replace(self, intent_hash=intent_hash, intent_since=now)

    def within(self, window: datetime.timedelta, now: datetime.datetime) -> ConvergenceState:
        return replace(self, observations=tuple(
            o for o in self.observations if now - o.at <= window))

    def observe(self, fp: str, pod_uid: str, now: datetime.datetime) -> ConvergenceState:
        if pod_uid in self.counted:
            return self
        return replace(self, observations=(*self.observations, Observation(fp, now)),
                       counted=self.counted | {pod_uid})

    def count(self, fp: str) -> int:
        return sum(1 for o in self.observations if o.fingerprint == fp)


def is_replacement(pod: PodInfo, state: ConvergenceState) -> bool:
    """Created after the hook's last eviction for this workload: an outcome to count."""
    return bool(state.last_eviction and pod.created and pod.created >= state.last_eviction)


def outcome(pods: Iterable[PodInfo], state: ConvergenceState) -> PodInfo | None:
    """The replacement the last eviction came back as, while not yet judged: the first Pod
    of the workload created after it, compliant or not.

    One per eviction: the hook evicts one Pod and its ReplicaSet creates one replacement, so
    the other Pods created after it (a scale-up while the webhook was unreachable, say) say
    nothing about that eviction; counting each of them would take one outage for a loop.
    """
    if state.last_eviction is None or state.judged is not None:
        return None
    fresh = [p for p in pods if is_replacement(p, state)]
    return min(fresh, key=lambda p: (p.created or state.last_eviction, p.name), default=None)
