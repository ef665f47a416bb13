"""The ``setLabelsByEviction`` runtime hook and loop suppression, decided for one workload. Pure.

Replaces Running Pods that missed their admission state through the Eviction API, one at a
time per workload: the next only once the workload is back at its desired count of Running,
Ready Pods. The decision and the loop-detection bookkeeping happen here; the state lives in
the workload's ``compactor.dev/convergence`` annotation, and the executor carries out the
eviction (a 429 from a PodDisruptionBudget backs the workload off in ``Memory``).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from compaction import names
from compaction.intent import intent_for
from compaction.policy import Policy
from compaction.selector import LabelSelector
from controller.plan.actions import Action, Evict, Patch, Target
from controller.plan.between_passes import Memory
from controller.plan.convergence import (
    ConvergenceState,
    fingerprint,
    is_compliant,
    outcome,
    skip_reason,
)
from controller.plan.events import workload_event
from controller.snapshot.fields import format_time
from controller.snapshot.pod import PodInfo
from controller.snapshot.workload import WorkloadInfo

# Longer than the webhook's owner-cache TTL (30 s by default): a Pod admitted sooner after
# the intent changed may have been judged on the old one, and would look like a loop.
INTENT_GRACE: Final = datetime.timedelta(seconds=35)


def settled(workload: WorkloadInfo, pods: Sequence[PodInfo]) -> bool:
    """Back at full strength: nothing pending or terminating, enough Ready Pods."""
    if any(p.deleting or not p.ready for p in pods):
        return False
    return len(pods) >= workload.replicas


@dataclass(frozen=True)
class HookDecision:
    actions: tuple[Action, ...] = ()
    suppressed: bool = False  # after this pass
    newly_suppressed: bool = False
    skipped: int = 0  # Pods it would replace but may not (a skip rule holds)


def _save(workload: WorkloadInfo, state: ConvergenceState,
          suppressed: bool | None = None, then: tuple[Action, ...] = ()) -> Patch:
    meta: dict[str, object] = {"annotations": {names.CONVERGENCE_ANNOTATION: state.render()}}
    if suppressed is not None:
        meta["labels"] = {names.SUPPRESSED_LABEL: "true" if suppressed else None}
    return Patch(workload.path, {"metadata": meta}, Target.STATE, then=then)


def forget(workload: WorkloadInfo) -> Patch | None:
    """No policy manages the workload any more: drop suppression and loop state."""
    if not workload.suppressed and names.CONVERGENCE_ANNOTATION not in workload.annotations:
        return None
    return Patch(workload.path, {"metadata": {
        "labels": {names.SUPPRESSED_LABEL: None},
        "annotations": {names.CONVERGENCE_ANNOTATION: None}}}, Target.STATE)


def decide(workload: WorkloadInfo, policy: Policy, pods: Sequence[PodInfo],
           nodes: Mapping[str, Mapping[str, str]], node_selector: LabelSelector,
           memory: Memory, now: datetime.datetime,
           intent_grace: datetime.timedelta = INTENT_GRACE,
           exempt: frozenset[str] = names.EXEMPT_SCHEDULERS) -> HookDecision:
    """One decision for one workload under its policy."""
    d = policy.descheduler
    state = ConvergenceState.parse(workload.annotations).within(d.loop_detection_window, now)
    if workload.suppressed:
        if state.suppressed_until and now < state.suppressed_until:
            return HookDecision(suppressed=True)
        lifted = workload_event(workload, "CompactionSuppressionLifted",
                                "suppression period ended; runtime replacement resumes",
                                "Warning")
        return HookDecision((_save(workload, ConvergenceState(), suppressed=False,
                                   then=(lifted,)),))
    if not policy.set_labels_by_eviction:
        return HookDecision()
    intent = intent_for(policy, workload.view.kind)
    noncompliant = [p for p in pods if not is_compliant(p, intent, exempt)
                    and p.phase == "Running"]
    before = state
    state = state.seen_intent(intent.hash, now)
    replacement = outcome(pods, state)
    if replacement is not None:
        state = replace(state, judged=now)
        if not is_compliant(replacement, intent, exempt):
            state = state.observe(fingerprint(workload.uid, intent, replacement),
                                  replacement.uid, now)
    looping = [o.fingerprint for o in state.observations
               if state.count(o.fingerprint) >= d.loop_detection_threshold]
    if looping:
        until = now + d.suppression_duration
        event = workload_event(workload, "CompactionSuppressed", (
            f"replacements came back non-compliant {d.loop_detection_threshold} times "
            f"with the same state (fingerprint {looping[0]}); runtime replacement and "
            f"descheduler eviction paused until {format_time(until)}"), "Warning")
        return HookDecision((_save(workload, replace(state, suppressed_until=until),
                                   suppressed=True, then=(event,)),),
                            suppressed=True, newly_suppressed=True)
    actions: list[Action] = [_save(workload, state)] if state != before else []
    if (not noncompliant or memory.awaiting(workload.path, (p.uid for p in pods), now)
            or not settled(workload, pods)):
        return HookDecision(tuple(actions))
    if state.intent_since and now - state.intent_since < intent_grace:
        return HookDecision(tuple(actions))
    if memory.backing_off(workload.path, now):
        return HookDecision(tuple(actions))
    candidates, skipped = [], 0
    for pod in noncompliant:
        if skip_reason(pod, policy, nodes.get(pod.node_name), node_selector,
                       workload.view.kind) is None:
            candidates.append(pod)
        else:
            skipped += 1
    if not candidates:
        return HookDecision(tuple(actions), skipped=skipped)
    victim = min(candidates, key=lambda p: p.name)
    actions.append(Evict(victim.namespace, victim.name, victim.uid, workload.path, then=(
        _save(workload, replace(state, last_eviction=now, judged=None)),)))
    return HookDecision(tuple(actions), skipped=skipped)
