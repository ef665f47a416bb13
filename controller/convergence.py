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
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

import orjson

from compaction import names
from compaction.intent import Intent, parse_intent
from compaction.policy import Policy
from compaction.safety import evictable_kinds, is_placeholder, unsafe_to_evict
from compaction.selector import LabelSelector
from compaction.workload import WorkloadType

SYSTEM_CRITICAL: Final = frozenset({"system-cluster-critical", "system-node-critical"})


def observed_state(pod: Mapping[str, Any]) -> dict[str, Any]:
    """What admission decided and nothing later can change: the scheduler. (Labels and the
    intent annotation are patched in place, so they say nothing about the admission.)"""
    return {"schedulerName": (pod.get("spec") or {}).get("schedulerName")
            or names.DEFAULT_SCHEDULER}


def is_compliant(pod: Mapping[str, Any], intent: Intent) -> bool:
    """Admitted with this intent: labels, intent hash, and our scheduler unless the Pod kept
    another non-default one on purpose (the GPU-scheduler rule of the webhook)."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    parsed = parse_intent((meta.get("annotations") or {}).get(names.INTENT_ANNOTATION, ""))
    if any(labels.get(k) != v for k, v in intent.labels.items()) or (
            parsed.intent is None or parsed.intent.hash != intent.hash):
        return False
    sched = observed_state(pod)["schedulerName"]
    return intent.scheduler_name is None or sched == intent.scheduler_name or (
        sched != names.DEFAULT_SCHEDULER)


def fingerprint(workload_uid: str, intent: Intent, pod: Mapping[str, Any]) -> str:
    body = orjson.dumps([workload_uid, intent.hash, observed_state(pod)],
                        option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(body).hexdigest()[:16]


def _has_local_storage(spec: Mapping[str, Any]) -> bool:
    return any("emptyDir" in v or "hostPath" in v for v in spec.get("volumes") or [])


def _has_pvc(spec: Mapping[str, Any]) -> bool:
    return any("persistentVolumeClaim" in v for v in spec.get("volumes") or [])


def skip_reason(pod: Mapping[str, Any], policy: Policy, node_labels: Mapping[str, str] | None,
                node_selector: LabelSelector, kind: WorkloadType) -> str | None:
    """Why the runtime hook must not replace this Pod of a ``kind`` workload; None when it may.

    Follows the eviction table (``compaction.safety``) and honours ``descheduler.nodeSelector``
    and the evictor flags; deliberately ignores nodeFit, the evictor's labelSelector, the
    eviction limits, the interval and the thresholds.
    """
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    annotations = meta.get("annotations") or {}
    ev = policy.descheduler.default_evictor
    if meta.get("deletionTimestamp"):
        return "deleting"
    if not spec.get("nodeName"):
        return "unscheduled"
    if (pod.get("status") or {}).get("phase") != "Running":
        return "not running"
    if meta.get("namespace") in names.PROTECTED_NAMESPACES:
        return "protected namespace"
    if names.MIRROR_ANNOTATION in annotations:
        return "mirror pod"
    if unsafe_to_evict(annotations):
        return "safe-to-evict"
    priority = spec.get("priority")
    if is_placeholder(priority):
        return "placeholder"
    if kind not in evictable_kinds(ev.evict_daemon_set_pods):
        return f"{kind.value} pods are not evicted"
    critical = spec.get("priorityClassName") in SYSTEM_CRITICAL or (
        isinstance(priority, int) and priority >= 2_000_000_000)
    if critical and not ev.evict_system_critical_pods:
        return "system critical"
    if _has_local_storage(spec) and not ev.evict_local_storage_pods:
        return "local storage"
    if _has_pvc(spec) and ev.ignore_pvc_pods:
        return "pvc"
    if node_selector and (node_labels is None or not node_selector.matches(node_labels)):
        return "node outside nodeSelector"
    return None


def _time(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _stamp(t: datetime.datetime) -> str:
    return t.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
                    if isinstance(o, list) and len(o) == 2 and (t := _time(o[1])))
        return cls(_time(body.get("lastEviction")), obs,
                   frozenset(str(u) for u in body.get("counted", [])),
                   _time(body.get("suppressedUntil")), str(body.get("intent", "")),
                   _time(body.get("intentSince")))

    def render(self) -> str:
        body: dict[str, Any] = {}
        if self.last_eviction:
            body["lastEviction"] = _stamp(self.last_eviction)
        if self.observations:
            body["obs"] = [[o.fingerprint, _stamp(o.at)] for o in self.observations]
        if self.counted:
            body["counted"] = sorted(self.counted)
        if self.suppressed_until:
            body["suppressedUntil"] = _stamp(self.suppressed_until)
        if self.intent_hash:
            body["intent"] = self.intent_hash
        if self.intent_since:
            body["intentSince"] = _stamp(self.intent_since)
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


def is_replacement(pod: Mapping[str, Any], state: ConvergenceState) -> bool:
    """Created after the hook's last eviction for this workload: an outcome to count."""
    created = _time((pod.get("metadata") or {}).get("creationTimestamp"))
    return bool(state.last_eviction and created and created >= state.last_eviction)
