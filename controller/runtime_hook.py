"""The ``setLabelsByEviction`` runtime hook and loop suppression (the I/O around convergence.py).

Replaces Running Pods that missed their admission state through the Eviction API, one at a
time per workload: the next only once the workload is back at its desired count of Running,
Ready Pods. A 429 from a PodDisruptionBudget is normal: back off and try on a later pass.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from compaction import kinds, names
from compaction.intent import intent_for
from compaction.policy import Policy
from compaction.selector import LabelSelector
from controller.api import Api, ApiError, Obj
from controller.convergence import (
    ConvergenceState,
    fingerprint,
    is_compliant,
    is_replacement,
    skip_reason,
)
from controller.metrics import ControllerMetrics
from controller.workloads import WorkloadObject

log = logging.getLogger("compactor.controller")
PDB_BACKOFF_SECONDS = 30.0
# Longer than the webhook's owner-cache TTL (30 s by default): a Pod admitted sooner after
# the intent changed may have been judged on the old one, and would look like a loop.
INTENT_GRACE = datetime.timedelta(seconds=35)
# How long an eviction may stay unseen in the Pods the hook is shown before it stops waiting.
EXPECTATION_SECONDS = 60.0


def _ready(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or [])


def settled(workload: WorkloadObject, pods: Sequence[Mapping[str, Any]]) -> bool:
    """Back at full strength: nothing pending or terminating, enough Ready Pods."""
    if any((p.get("metadata") or {}).get("deletionTimestamp") or not _ready(p) for p in pods):
        return False
    return len(pods) >= workload.replicas


class RuntimeHook:
    def __init__(self, api: Api, metrics: ControllerMetrics,
                 clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(
                     datetime.UTC), intent_grace: datetime.timedelta = INTENT_GRACE) -> None:
        self.api, self.metrics, self.clock = api, metrics, clock
        self.intent_grace = intent_grace
        self._backoff: dict[str, float] = {}
        self._evicted: dict[str, tuple[str, float]] = {}  # workload path -> (Pod uid, when)

    def _awaiting(self, workload: WorkloadObject, pods: Sequence[Obj]) -> bool:
        """The last eviction is not visible yet in ``pods`` (they come from a watch cache,
        which may be a moment behind): not settled, whatever the count says."""
        expected = self._evicted.get(workload.path)
        if expected is None:
            return False
        uid, at = expected
        if time.monotonic() - at < EXPECTATION_SECONDS and any(
                str((p.get("metadata") or {}).get("uid")) == uid for p in pods):
            return True
        del self._evicted[workload.path]
        return False

    async def _save(self, workload: WorkloadObject, state: ConvergenceState,
                    suppressed: bool | None = None) -> None:
        meta: dict[str, Any] = {"annotations": {names.CONVERGENCE_ANNOTATION: state.render()}}
        if suppressed is not None:
            meta["labels"] = {names.SUPPRESSED_LABEL: "true" if suppressed else None}
        await self.api.patch(workload.path, {"metadata": meta})

    async def _event(self, workload: WorkloadObject, reason: str, message: str) -> None:
        try:
            await self.api.create(kinds.kind("Event").path(workload.view.namespace), {
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": f"{workload.view.name}.",
                             "namespace": workload.view.namespace},
                "involvedObject": {"kind": workload.view.kind.value, "name": workload.view.name,
                                   "namespace": workload.view.namespace, "uid": workload.uid,
                                   "apiVersion": kinds.kind(workload.view.kind.value).api_version},
                "reason": reason, "message": message, "type": "Warning",
                "source": {"component": "compactor-controller"},
                "reportingComponent": "compactor-controller"})
        except ApiError as e:
            log.warning("could not record event: %s", e)

    async def forget(self, workload: WorkloadObject) -> None:
        """No policy manages the workload any more: drop suppression and loop state."""
        await self.api.patch(workload.path, {"metadata": {
            "labels": {names.SUPPRESSED_LABEL: None},
            "annotations": {names.CONVERGENCE_ANNOTATION: None}}})

    async def step(self, workload: WorkloadObject, policy: Policy, pods: Sequence[Obj],
                   nodes: Mapping[str, Mapping[str, str]],
                   node_selector: LabelSelector) -> bool:
        """One decision for one workload; returns whether it is suppressed afterwards."""
        now = self.clock()
        d = policy.descheduler
        state = ConvergenceState.parse(workload.annotations).within(d.loop_detection_window, now)
        if workload.suppressed:
            if state.suppressed_until and now < state.suppressed_until:
                return True
            await self._save(workload, ConvergenceState(), suppressed=False)
            await self._event(workload, "CompactionSuppressionLifted",
                              "suppression period ended; runtime replacement resumes")
            log.info("lifted suppression of %s", workload.path)
            return False
        if not policy.set_labels_by_eviction:
            return False
        intent = intent_for(policy, workload.view.kind)
        noncompliant = [p for p in pods if not is_compliant(p, intent)
                        and (p.get("status") or {}).get("phase") == "Running"]
        before = state
        state = state.seen_intent(intent.hash, now)
        for pod in noncompliant:
            if is_replacement(pod, state):
                state = state.observe(fingerprint(workload.uid, intent, pod),
                                      str(pod["metadata"]["uid"]), now)
        looping = [o.fingerprint for o in state.observations
                   if state.count(o.fingerprint) >= d.loop_detection_threshold]
        if looping:
            until = now + d.suppression_duration
            await self._save(workload, replace(state, suppressed_until=until), suppressed=True)
            self.metrics.suppressions.inc()
            await self._event(workload, "CompactionSuppressed", (
                f"replacements came back non-compliant {d.loop_detection_threshold} times "
                f"with the same state (fingerprint {looping[0]}); runtime replacement and "
                f"descheduler eviction paused until {until:%Y-%m-%dT%H:%M:%SZ}"))
            log.warning("suppressed %s: admission loop %s", workload.path, looping[0])
            return True
        if state != before:
            await self._save(workload, state)
        if not noncompliant or self._awaiting(workload, pods) or not settled(workload, pods):
            return False
        if state.intent_since and now - state.intent_since < self.intent_grace:
            return False
        if self._backoff.get(workload.path, 0.0) > time.monotonic():
            return False
        candidates = []
        for pod in noncompliant:
            node = nodes.get(str((pod.get("spec") or {}).get("nodeName", "")))
            reason = skip_reason(pod, policy, node, node_selector, workload.view.kind)
            if reason is None:
                candidates.append(pod)
            else:
                self.metrics.evictions.labels("skipped").inc()
        if not candidates:
            return False
        victim = sorted(candidates, key=lambda p: p["metadata"]["name"])[0]
        ns, name = victim["metadata"]["namespace"], victim["metadata"]["name"]
        try:
            await self.api.create(kinds.kind("Pod").path(ns, name, "eviction"), {
                "apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": ns}})
        except ApiError as e:
            if e.status == 429:
                self.metrics.evictions.labels("pdb_blocked").inc()
                self._backoff[workload.path] = time.monotonic() + PDB_BACKOFF_SECONDS
                log.info("eviction of %s/%s blocked by a disruption budget; backing off",
                         ns, name)
            elif e.status != 404:
                raise
            return False
        self.metrics.evictions.labels("evicted").inc()
        self._evicted[workload.path] = (str(victim["metadata"].get("uid")), time.monotonic())
        log.info("evicted %s/%s to converge %s", ns, name, workload.path)
        await self._save(workload, replace(state, last_eviction=now))
        return False
