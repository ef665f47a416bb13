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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from compaction import names
from compaction.intent import Intent, intent_for
from compaction.policy import Policy
from compaction.selector import LabelSelector
from compaction.workload import WorkloadType
from controller.drain_planner.allowance import NONE, Allowance
from controller.drain_planner.readmission import Readmission
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
from controller.plan.eviction_limits import budget_room
from controller.plan.membership import Membership, by_workload
from controller.plan.workload_metadata import intent_of
from controller.snapshot.fields import format_time
from controller.snapshot.pdb import PdbInfo, by_namespace, eviction_refused
from controller.snapshot.pod import PodInfo
from controller.snapshot.workload import WorkloadInfo, WorkloadKey

# Longer than the webhook's owner-cache TTL (30 s by default): a Pod admitted sooner after
# the intent changed may have been judged on the old one, and would look like a loop.
INTENT_GRACE: Final = datetime.timedelta(seconds=35)
# How long a workload that is not back at full strength still holds its policy's new drains:
# a replacement or a rollout comes up within it; a Pod not Ready past it is broken, and the
# hook, which waits for the workload to settle, would never act on it.
COMING_UP: Final = datetime.timedelta(minutes=10)


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
           exempt: frozenset[str] = names.EXEMPT_SCHEDULERS,
           protected: frozenset[str] = names.PROTECTED_NAMESPACES,
           readmission: Readmission | None = None,
           first: frozenset[str] = frozenset(), allowance: Allowance = NONE,
           room: int | None = None) -> HookDecision:
    """One decision for one workload under its policy. ``readmission``: where replacements
    land (a Pod whose replacement would come back to its node, or find none, is left alone);
    ``first``: the nodes the plan would free: with ``readmission``, only their Pods are
    replaced (elsewhere an eviction frees no node), without it theirs first; ``allowance``:
    the Pods Compactor may not evict now; ``room``: the evictions the workload's budget still
    allows (None: no budget)."""
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
    if room is not None and room < 1:
        return HookDecision(tuple(actions), skipped=len(noncompliant))
    candidates, skipped = [], 0
    for pod in noncompliant:
        if skip_reason(pod, policy, nodes.get(pod.node_name), node_selector,
                       workload.view.kind, protected) is None and allowance.evictable(pod):
            candidates.append(pod)
        else:
            skipped += 1
    victim = None
    for pod in sorted(candidates, key=lambda p: (p.node_name not in first, p.name)):
        if readmission is not None and pod.node_name not in first:
            # Its node stays in use whatever moves: the eviction would free nothing. Only a
            # drain or a rollout replaces it.
            skipped += 1
            continue
        target = readmission.target(pod) if readmission is not None else None
        if readmission is not None and (target is None or target.info.name == pod.node_name):
            skipped += 1
            continue
        if readmission is not None and target is not None:
            readmission.relocate(pod, target)  # the next workload's judged with it there
        victim = pod
        break
    if victim is None:
        return HookDecision(tuple(actions), skipped=skipped)
    actions.append(Evict(victim.namespace, victim.name, victim.uid, workload.path, then=(
        _save(workload, replace(state, last_eviction=now, judged=None)),)))
    return HookDecision(tuple(actions), skipped=skipped)


def awaiting(pods: Iterable[PodInfo], members: Mapping[tuple[str, str], Membership],
             pools: Mapping[str, LabelSelector], node_labels: Mapping[str, Mapping[str, str]],
             exempt: frozenset[str], up: bool, pdbs: Sequence[PdbInfo] = (),
             protected: frozenset[str] = names.PROTECTED_NAMESPACES,
             allowance: Allowance = NONE) -> Iterator[tuple[PodInfo, Membership]]:
    """The Pods the runtime hook would replace, by its own rule, with their membership: one
    it never replaces (a DaemonSet's, local storage, outside the pool...) is not among them.
    Nor one whose PodDisruptionBudget allows no disruption now: its eviction is refused until
    the budget allows one, which for ``maxUnavailable: 0`` is never. Nor one Compactor may
    not evict now (``allowance``: its workload's eviction budget, a recent replacement)."""
    intents: dict[tuple[str, WorkloadType], Intent | None] = {}
    budgets = by_namespace(pdbs)  # a budget covers only the Pods of its own namespace
    for pod in pods:
        m = members.get(pod.key)
        if m is None or m.policy is None or not m.policy.set_labels_by_eviction or \
                pod.phase != "Running" or m.workload.suppressed:
            continue
        if eviction_refused(pod, budgets.get(pod.namespace, ())) is not None or \
                not allowance.evictable(pod):
            continue
        which = (m.policy.id, m.workload.view.kind)
        if which not in intents:
            intents[which] = intent_of(m.policy, m.workload.view.kind, up)
        intent = intents[which]
        if intent is not None and awaits_replacement(
                pod, intent, m.policy, node_labels.get(pod.node_name), pools[m.policy.id],
                m.workload.view.kind, exempt, protected):
            yield pod, m


def converging(pods: Sequence[PodInfo], members: Mapping[tuple[str, str], Membership],
               pools: Mapping[str, LabelSelector],
               node_labels: Mapping[str, Mapping[str, str]], exempt: frozenset[str],
               up: bool, now: datetime.datetime, pdbs: Sequence[PdbInfo] = (),
               protected: frozenset[str] = names.PROTECTED_NAMESPACES,
               readmission: Readmission | None = None, allowance: Allowance = NONE,
               first: frozenset[str] = frozenset()) -> set[str]:
    """Policies whose runtime hook still has Pods to replace (``awaiting``): it starts no new
    drain meanwhile (the drains under way go on), since the hook's replacements and a drain's
    evictees would contend for the same room, and an evictee that finds none comes back to
    the node it left. With ``readmission``, as in ``decide``, only the Pods of ``first`` (the
    nodes the plan would free) are replaced, and only those whose replacement would not come
    back to their node: the others are left alone and hold nothing. Nor does a workload the
    hook cannot act on: one short of strength with no Pod younger than ``COMING_UP``."""
    waiting: dict[WorkloadKey, Membership] = {}
    for pod, m in awaiting(pods, members, pools, node_labels, exempt, up, pdbs, protected,
                           allowance):
        if m.workload.key not in waiting and (readmission is None or (
                pod.node_name in first and not readmission.comes_back(pod))):
            waiting[m.workload.key] = m
    if not waiting:
        return set()
    mine = by_workload(pods, members, waiting)
    return {m.policy.id for key, m in waiting.items()
            if m.policy is not None and _may_act(m.workload, mine[key], now)}


def _may_act(workload: WorkloadInfo, pods: Sequence[PodInfo], now: datetime.datetime) -> bool:
    """The hook acts on the workload once it settles: it has, or it is coming up."""
    return settled(workload, pods) or any(
        p.created is not None and now - p.created < COMING_UP
        for p in pods if p.deleting or not p.ready)


def replay(pods: Sequence[PodInfo], members: Mapping[tuple[str, str], Membership],
           pools: Mapping[str, LabelSelector], node_labels: Mapping[str, Mapping[str, str]],
           exempt: frozenset[str], up: bool, pdbs: Sequence[PdbInfo],
           readmission: Readmission, first: frozenset[str],
           protected: frozenset[str] = names.PROTECTED_NAMESPACES,
           allowance: Allowance = NONE) -> list[PodInfo]:
    """``pods`` once the runtime hook has replaced all it would, each replacement where the
    compaction scheduler puts it: for the preview. The controller replaces one Pod per
    workload at a time, every workload at once: here a round takes each workload's next in
    turn, and only the Pods of ``first`` (the nodes the plan would free), as ``decide`` does;
    a workload's eviction budget, as ``allowance`` has it, bounds its replacements."""
    queues: dict[WorkloadKey, list[PodInfo]] = defaultdict(list)
    room: dict[WorkloadKey, int] = {}
    for pod, m in awaiting(pods, members, pools, node_labels, exempt, up, pdbs, protected,
                           allowance):
        if pod.node_name not in first:
            continue  # its node stays in use: ``decide`` leaves it alone
        queues[m.workload.key].append(pod)
        if (budget := allowance.budget_of.get(pod.key)) is not None:
            room[m.workload.key] = allowance.left.get(budget, 0)
    for queue in queues.values():
        queue.sort(key=lambda p: (p.node_name not in first, p.name), reverse=True)  # popped
    moved: dict[tuple[str, str], PodInfo] = {}
    while any(queues.values()):
        for key in sorted(queues):
            queue = queues[key]
            if room.get(key, 1) < 1:  # its budget allows no more
                queue.clear()
            while queue:
                pod = queue.pop()
                target = readmission.target(pod)
                if target is None or target.info.name == pod.node_name:
                    continue
                readmission.relocate(pod, target)
                moved[pod.key] = replace(pod, node_name=target.info.name)
                if key in room:
                    room[key] -= 1
                break
    return [moved.get(p.key, p) for p in pods]


def run_hook(decided: Mapping[WorkloadKey, tuple[WorkloadInfo, Policy | None]],
             members: Mapping[tuple[str, str], Membership],
             node_labels: Mapping[str, Mapping[str, str]],
             pools: Mapping[str, LabelSelector], pods: Iterable[PodInfo],
             intent_grace: datetime.timedelta, exempt: frozenset[str], memory: Memory,
             now: datetime.datetime,
             waiting: frozenset[str], out: Draft,
             protected: frozenset[str] = names.PROTECTED_NAMESPACES,
             readmission: Readmission | None = None,
             first: frozenset[str] = frozenset(), allowance: Allowance = NONE,
             marked: frozenset[tuple[str, str]] = frozenset()) -> None:
    """``waiting``: policies whose scheduler cannot schedule; their hook replaces nothing
    meanwhile (a replacement would wait for that scheduler, or converge to an intent about to
    change back). ``marked``: the Pods the drains mark this pass, which the workloads'
    eviction budgets count first."""
    grouped = by_workload(pods, members)
    for key, (workload, policy) in decided.items():
        if policy is None:
            forget = runtime_hook.forget(workload)
            if forget is not None:
                out.actions.append(forget)
            continue
        if policy.id in waiting:
            continue
        mine = grouped.get(key, [])
        decision = runtime_hook.decide(workload, policy, mine, node_labels,
                                       pools[policy.id], memory, now, intent_grace, exempt,
                                       protected, readmission, first, allowance,
                                       budget_room(allowance, mine, marked))
        out.actions += decision.actions
        out.suppressed += decision.suppressed
        out.suppressions += decision.newly_suppressed
        out.skipped += decision.skipped
