"""The ``setLabelsByEviction`` runtime hook and loop suppression, decided for one workload. Pure.

Replaces Running Pods that missed their admission state through the Eviction API, one at a
time per workload: the next only once the workload is back at its desired count of Running,
Ready Pods. The decision and the loop-detection bookkeeping happen here; the state lives in
the workload's ``compactor.dev/convergence`` annotation, and the executor carries out the
eviction (a 429 from a PodDisruptionBudget backs the workload off in ``Memory``).
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from compaction import names
from compaction.intent import Intent, intent_for
from compaction.policy import Policy
from compaction.selector import LabelSelector
from compaction.workload import WorkloadType
from controller.plan import runtime_hook
from controller.plan.actions import (
    Action,
    Evict,
    Patch,
    Target,
)
from controller.plan.between_passes import Memory
from controller.plan.convergence import (
    ConvergenceState,
    awaits_replacement,
    fingerprint,
    is_compliant,
    outcome,
    skip_reason,
)
from controller.plan.draft import Draft
from controller.plan.events import workload_event
from controller.plan.membership import Membership
from controller.plan.workload_metadata import intent_of
from controller.snapshot.fields import format_time
from controller.snapshot.pdb import PdbInfo, eviction_refused
from controller.snapshot.pod import PodInfo
from controller.snapshot.workload import WorkloadInfo, WorkloadKey

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


def converging(pods: Iterable[PodInfo], members: Mapping[tuple[str, str], Membership],
               pools: Mapping[str, LabelSelector],
               node_labels: Mapping[str, Mapping[str, str]], exempt: frozenset[str],
               up: bool, pdbs: Sequence[PdbInfo] = ()) -> set[str]:
    """Policies whose runtime hook still has Pods to replace: it starts no new drain
    meanwhile (the drains under way go on), since the hook's replacements and a drain's
    evictees would contend for the same room, and an evictee that finds none comes back to
    the node it left. Only Pods the hook would replace count, by the hook's own rule: one it
    never replaces (a DaemonSet's, local storage, outside the pool...) must not hold the
    drains for ever. Nor does one whose PodDisruptionBudget allows no disruption now: its
    eviction is refused until the budget allows one, which for ``maxUnavailable: 0`` is
    never, and no replacement of it contends for room meanwhile."""
    out: set[str] = set()
    intents: dict[tuple[str, WorkloadType], Intent | None] = {}
    for pod in pods:
        m = members.get(pod.key)
        if m is None or m.policy is None or not m.policy.set_labels_by_eviction or \
                m.policy.id in out or pod.phase != "Running" or m.workload.suppressed:
            continue
        if eviction_refused(pod, pdbs) is not None:
            continue
        which = (m.policy.id, m.workload.view.kind)
        if which not in intents:
            intents[which] = intent_of(m.policy, m.workload.view.kind, up)
        intent = intents[which]
        if intent is not None and awaits_replacement(
                pod, intent, m.policy, node_labels.get(pod.node_name), pools[m.policy.id],
                m.workload.view.kind, exempt):
            out.add(m.policy.id)
    return out


def run_hook(decided: Mapping[WorkloadKey, tuple[WorkloadInfo, Policy | None]],
             members: Mapping[tuple[str, str], Membership],
             node_labels: Mapping[str, Mapping[str, str]],
             pools: Mapping[str, LabelSelector], pods: Iterable[PodInfo],
             intent_grace: datetime.timedelta, exempt: frozenset[str], memory: Memory,
             now: datetime.datetime,
             waiting: frozenset[str], out: Draft) -> None:
    """``waiting``: policies whose scheduler cannot schedule; their hook replaces nothing
    meanwhile (a replacement would wait for that scheduler, or converge to an intent about to
    change back)."""
    by_workload: dict[WorkloadKey, list[PodInfo]] = defaultdict(list)
    for pod in pods:
        m = members.get(pod.key)
        if m is not None:
            by_workload[m.workload.key].append(pod)
    for key, (workload, policy) in decided.items():
        if policy is None:
            forget = runtime_hook.forget(workload)
            if forget is not None:
                out.actions.append(forget)
            continue
        if policy.id in waiting:
            continue
        decision = runtime_hook.decide(workload, policy, by_workload.get(key, []), node_labels,
                                       pools[policy.id], memory, now, intent_grace, exempt)
        out.actions += decision.actions
        out.suppressed += decision.suppressed
        out.suppressions += decision.newly_suppressed
        out.skipped += decision.skipped
