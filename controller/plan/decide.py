"""One pass's decisions: ``plan(snapshot, settings, now, memory) -> Plan``. Pure.

From what the reader saw, in this order: each workload's policy and metadata, the stale
copies on intermediate owners, the drain plan across every policy
(``controller.drain_planner.planner``), each Pod's metadata (the drains' marks included), where
the Pods the drains evicted landed, the runtime hook, the drain taints on nodes, the compaction
scheduler's objects, each policy's descheduler objects, and the policies' status. Nothing here
does I/O; ``controller.act.executor`` carries the plan out.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from compaction.evaluation import DEFAULT, Evaluation
from compaction.policy import Policy, SchedulerMode
from compaction.resource_plan import Composition
from compaction.safety import is_placeholder
from compaction.selector import LabelSelector
from controller.components import descheduler
from controller.components import scheduler as scheduler_manifests
from controller.drain_planner import memo as drain_memo
from controller.drain_planner.drain_plan import DrainPlan, Member
from controller.drain_planner.planner import choose_drains
from controller.drain_planner.readmission import Readmission
from controller.drain_planner.taint import drain_owner
from controller.plan import resources, scheduler_routing
from controller.plan.actions import Evict, EvictPurpose, Plan
from controller.plan.between_passes import Memory
from controller.plan.draft import Draft
from controller.plan.eviction_limits import Limits, after_moves, limits, record_patches
from controller.plan.forecast import eventually, with_replacements
from controller.plan.landings import Mark, follow
from controller.plan.membership import Membership, label_pods, memberships
from controller.plan.node_notices import notices
from controller.plan.own_objects import (
    apply_deschedulers,
    apply_scheduler,
    failed_runs,
    label_values,
    own_objects,
)
from controller.plan.pod_metadata import OwnerIndex
from controller.plan.policy_status import evaluation_status, policy_status
from controller.plan.runtime_hook import converging, replay, run_hook
from controller.plan.scheduler_routing import SchedulerHealth
from controller.plan.settings import PlanSettings
from controller.plan.taint_life import taint_actions
from controller.plan.workload_metadata import clean_stale_copies, label_workloads
from controller.snapshot.pdb import PdbInfo
from controller.snapshot.pod import PodInfo
from controller.snapshot.snapshot import Snapshot
from controller.snapshot.workload import WorkloadInfo, WorkloadKey


@dataclass(frozen=True)
class _Decided:
    """What a pass decides before it plans drains, and what the rest of it reads."""

    active: list[Policy]
    evaluation: Evaluation
    health: SchedulerHealth
    composed: Mapping[WorkloadKey, Composition]
    workloads: Mapping[WorkloadKey, tuple[WorkloadInfo, Policy | None]]
    members: Mapping[tuple[str, str], Membership]
    blocked: Mapping[str, int]  # resource plans found blocked now, by reason
    observed: Mapping[str, set[str]]
    pools: Mapping[str, LabelSelector]
    node_labels: Mapping[str, Mapping[str, str]]
    waiting: frozenset[str]  # policies whose drains wait for the scheduler
    readmission: Readmission  # where the runtime hook's replacements land
    limits: Limits  # the workloads' eviction budgets and recent replacements

    @property
    def drain_policies(self) -> list[tuple[Policy, LabelSelector]]:
        return [(p, self.pools[p.id]) for p in self.active]

    @property
    def member_of(self) -> dict[tuple[str, str], Member]:
        return {k: m.member for k, m in self.members.items()}


def _decide(snapshot: Snapshot, settings: PlanSettings, now: datetime.datetime,
            memory: Memory, out: Draft) -> _Decided:
    active = [p.acting for p in snapshot.policies if p.acting is not None and p.acting.enabled]
    evaluation = snapshot.evaluation.evaluation if snapshot.evaluation else DEFAULT
    evaluation_status(snapshot.evaluation, settings, now, out)
    health, fell_back = scheduler_routing.assess(
        snapshot.policies,
        own_objects(snapshot).get(("Deployment", scheduler_manifests.DEPLOYMENT)),
        any(p.scheduler.mode is SchedulerMode.MANAGED for p in active), snapshot.pods,
        settings.namespace, now, settings.scheduler_down_after, settings.scheduler_recovery)
    up = health.routes
    out.actions += scheduler_routing.routing_events(
        health, fell_back, settings.namespace, scheduler_manifests.DEPLOYMENT,
        settings.scheduler_recovery)
    composed = resources.compositions(snapshot, evaluation)
    decided = label_workloads(snapshot.workloads, active, evaluation, composed, up, out)
    index = OwnerIndex.build(snapshot.owners)
    clean_stale_copies(index, decided, composed, up, out)
    members = memberships(snapshot.pods, index, decided, settings.protected_namespaces)
    blocking = resources.blocked_events(snapshot.workloads, composed, memory, now)
    out.actions.extend(blocking.events)
    observed = label_values(snapshot.nodes)
    pools = {p.id: descheduler.node_pool(p, observed) for p in active}
    node_labels = {n.name: n.labels for n in snapshot.nodes}
    # Policies that start no drain now: their runtime hook still has Pods to replace, or
    # their scheduler cannot schedule (a drain's evictees would wait for it).
    waiting = frozenset() if up else frozenset(
        p.id for p in active if p.scheduler.mode is SchedulerMode.MANAGED)
    readmission = Readmission(snapshot.nodes, snapshot.pods)
    found = limits(decided, members, snapshot.pods, now,
                   frozenset(n.name for n in snapshot.nodes if drain_owner(n) is not None))
    return _Decided(active, evaluation, health, composed, decided, members, blocking.newly,
                    observed, pools, node_labels, waiting, readmission, found)


def _paused(d: _Decided, settings: PlanSettings, pods: Sequence[PodInfo],
            pdbs: Sequence[PdbInfo], first: frozenset[str], now: datetime.datetime,
            readmission: Readmission | None = None) -> frozenset[str]:
    """The policies that start no drain now: their scheduler cannot schedule, or their runtime
    hook still has Pods to replace on ``first``, the nodes the plan frees (whether a node is
    freeable does not depend on which policies are paused)."""
    return frozenset(d.waiting | converging(
        pods, d.members, d.pools, d.node_labels, settings.exempt_schedulers, d.health.routes,
        now, pdbs, settings.protected_namespaces, readmission or d.readmission,
        d.limits.allowance, first))


def plan(snapshot: Snapshot, settings: PlanSettings, now: datetime.datetime,
         memory: Memory | None = None) -> Plan:
    memory = memory or Memory()
    invalid = {p.key: list(p.problems) for p in snapshot.policies if p.policy is None}
    out = Draft()
    d = _decide(snapshot, settings, now, memory, out)
    drains, memo = drain_memo.reuse_or_choose(
        memory.drains, d.drain_policies, snapshot.nodes, snapshot.pods, d.member_of,
        snapshot.pdbs, now, settings.drain_timeout, d.waiting, settings.protected_namespaces,
        d.limits.allowance)
    first = _freeable(drains)
    if paused := _paused(d, settings, snapshot.pods, snapshot.pdbs, first, now) - d.waiting:
        # Planned again with them paused, the memo kept for the plan without: the pause lasts
        # only while the hook replaces the Pods of the nodes the plan frees.
        drains = choose_drains(d.drain_policies, snapshot.nodes, snapshot.pods, d.member_of,
                               snapshot.pdbs, now, settings.drain_timeout, d.waiting | paused,
                               settings.protected_namespaces, d.limits.allowance)
    # A drain under way pauses while its Pods' scheduler cannot schedule: the taint stays, and
    # no Pod keeps the mark its descheduler evicts by (an evictee would wait for the scheduler).
    draining = {key: (p.policy, p.moves.get(key, "")) for p in drains
                if p.policy not in d.waiting for node in p.draining for key in p.evict[node]}
    start = len(out.actions)  # the evictions this pass decides are counted before any
    label_pods(snapshot.pods, d.members, draining, d.health.routes, out)
    landings, landed = follow(memory.landings, snapshot.pods,
                              {k: m.workload.key for k, m in d.members.items()},
                              _marks(draining, d.members, snapshot, drains), now)
    run_hook(d.workloads, d.members, d.node_labels, d.pools, snapshot.pods,
             settings.intent_grace, settings.exempt_schedulers, memory, now, d.waiting, out,
             settings.protected_namespaces, d.readmission, first,
             d.limits.allowance, frozenset(draining))
    out.actions[start:start] = record_patches(
        d.workloads, d.limits, _counted(draining, d.members, snapshot, out.actions[start:]), now)
    stranded = scheduler_routing.stranded(
        snapshot.pods, d.members, d.health, now, settings.scheduler_down_after,
        settings.intent_grace, settings.stranded_after)
    out.actions += stranded
    out.actions += taint_actions(snapshot.nodes, drains, {p.id: p for p in d.active}, now)
    # After the taints' Events: what a node is told last is why it stays.
    out.actions += notices(snapshot.nodes, drains, snapshot.node_events, now)
    apply_scheduler(d.active, snapshot, settings, memory, now, out)
    sizes = apply_deschedulers(d.active, d.pools, d.observed, out.managed, snapshot, settings,
                               memory, out)
    failed = failed_runs(d.active, snapshot, settings, memory, now, out)
    policy_status(snapshot.policies, out.managed, d.health, settings, sizes,
                  {p.policy: p for p in drains}, failed, memory, now, out, landings)
    out.actions.extend(resources.static_status(
        snapshot.static_policies, d.composed,
        ((pod, m.workload.key) for pod in snapshot.pods if (m := d.members.get(pod.key))),
        now))
    return Plan(tuple(out.actions), dict(out.managed), invalid, out.suppressed,
                out.suppressions, out.skipped, tuple(drains), tuple(out.selections),
                d.blocked, memo, d.health.routing.value, len(stranded), tuple(landed),
                landings, d.limits.held_counts())


def _counted(draining: Mapping[tuple[str, str], object],
             members: Mapping[tuple[str, str], Membership], snapshot: Snapshot,
             actions: Sequence[object]) -> dict[WorkloadKey, list[str]]:
    """The uids of the Pods whose evictions this pass decides, per workload: those the drains
    mark, and those the runtime hook evicts."""
    # Read off the Pods only while a drain marks some: most passes mark none.
    uids = {p.key: p.uid for p in snapshot.pods if p.key in draining} if draining else {}
    by_path = {m.workload.path: m.workload.key for m in members.values()}
    out: dict[WorkloadKey, list[str]] = {}
    for key in draining:
        if (m := members.get(key)) is not None and key in uids:
            out.setdefault(m.workload.key, []).append(uids[key])
    for a in actions:
        if isinstance(a, Evict) and a.purpose is EvictPurpose.RUNTIME_HOOK and \
                (w := by_path.get(a.workload)) is not None:
            out.setdefault(w, []).append(a.pod_uid)
    return out


def _marks(draining: Mapping[tuple[str, str], tuple[str, str]],
           members: Mapping[tuple[str, str], Membership], snapshot: Snapshot,
           drains: Sequence[DrainPlan]) -> dict[tuple[str, str], Mark]:
    """The Pods marked this pass, each with where it goes and the nodes the plan counts as
    free: every node no Pod keeps in use (empty, or running only DaemonSet, mirror or
    placeholder Pods), and the nodes the drains free."""
    if not draining:
        return {}
    kept = {p.node_name for p in snapshot.pods
            if p.occupies and not (p.daemon or p.mirror or is_placeholder(p.priority))}
    freed = {n for p in drains for n in (*p.freeable, *p.draining, *p.drained)}
    free = frozenset(n.name for n in snapshot.nodes if n.name not in kept or n.name in freed)
    return {key: Mark(members[key].workload.key, policy, planned, free)
            for key, (policy, planned) in draining.items() if key in members}


def drain_plans(snapshot: Snapshot, settings: PlanSettings,
                now: datetime.datetime) -> tuple[DrainPlan, ...]:
    """What the passes would drain from ``snapshot``, one after the other, with nothing to
    reuse (``forecast.eventually``), and nothing else: for a reader that carries no action out
    (the preview), which would otherwise pay for every Pod's labels, the runtime hook and the
    digest kept for the next pass. Where the runtime hook has Pods to replace, the drains wait
    for it: they are those of the cluster its replacements leave (``replay``)."""
    return drain_planner(snapshot, settings, now)(Lift())


@dataclass(frozen=True)
class Lift:
    """What a counterfactual plan changes of the drain planner's inputs (the preview's "what
    if"): policies replaced by id, the Pods, the PodDisruptionBudgets; None keeps the
    snapshot's."""

    policies: Mapping[str, Policy] = field(default_factory=dict)
    pods: tuple[PodInfo, ...] | None = None
    pdbs: tuple[PdbInfo, ...] | None = None


def drain_planner(snapshot: Snapshot, settings: PlanSettings, now: datetime.datetime
                  ) -> Callable[[Lift], tuple[DrainPlan, ...]]:
    """``drain_plans`` of ``snapshot`` with the planner's inputs lifted: the pass's decisions
    (memberships, pools, pauses) made once, the drains planned again per ``Lift``."""
    d = _decide(snapshot, settings, now, Memory(), Draft())
    # A Pod the passes would have moved by then is a replacement, held where its policy says.
    holds = {k: m.policy.descheduler.evict_replacements_after > datetime.timedelta(0)
             for k, m in d.members.items() if m.policy is not None}

    def plans(lift: Lift) -> tuple[DrainPlan, ...]:
        policies = [(lift.policies.get(p.id, p), pool) for p, pool in d.drain_policies]
        pdbs = snapshot.pdbs if lift.pdbs is None else lift.pdbs
        start = snapshot.pods if lift.pods is None else lift.pods
        at = {p.key: p.node_name for p in start}

        def choose(pods: Sequence[PodInfo], paused: frozenset[str] = d.waiting
                   ) -> list[DrainPlan]:
            moved = (p.key for p in pods if p.node_name != at.get(p.key, p.node_name))
            return choose_drains(policies, snapshot.nodes, pods, d.member_of, pdbs, now,
                                 settings.drain_timeout, paused, settings.protected_namespaces,
                                 after_moves(d.limits.allowance, moved, holds))

        judged = Readmission(snapshot.nodes, start)  # asked only, never moved: one for both

        def paused(first: frozenset[str]) -> frozenset[str]:
            return _paused(d, settings, start, pdbs, first, now, judged) - d.waiting

        # Planned once more to find the nodes freed only where a hook has Pods to replace.
        if not paused(frozenset(n.name for n in snapshot.nodes)) or \
                not paused(first := _freeable(choose(start))):
            return eventually(choose, start)
        # Replayed on a cluster of its own: each replay relocates the Pods it replaces.
        pods = replay(start, d.members, d.pools, d.node_labels, settings.exempt_schedulers,
                      d.health.routes, pdbs, Readmission(snapshot.nodes, start), first,
                      settings.protected_namespaces, d.limits.allowance)
        return with_replacements(start, pods, eventually(choose, pods), {
            key: m.policy.id for key, m in d.members.items() if m.policy is not None})
    return plans


def _freeable(drains: Sequence[DrainPlan]) -> frozenset[str]:
    return frozenset(n for p in drains for n in p.freeable)
