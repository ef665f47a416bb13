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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

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
from controller.plan import resources, scheduler_routing
from controller.plan.actions import (
    Plan,
)
from controller.plan.between_passes import Memory
from controller.plan.draft import Draft
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
    paused: frozenset[str]  # policies that start no drain now
    readmission: Readmission  # where the runtime hook's replacements land

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
    paused = frozenset(waiting | converging(snapshot.pods, members, pools, node_labels,
                                            settings.exempt_schedulers, up, snapshot.pdbs,
                                            settings.protected_namespaces, readmission))
    return _Decided(active, evaluation, health, composed, decided, members, blocking.newly,
                    observed, pools, node_labels, waiting, paused, readmission)


def plan(snapshot: Snapshot, settings: PlanSettings, now: datetime.datetime,
         memory: Memory | None = None) -> Plan:
    memory = memory or Memory()
    invalid = {p.key: list(p.problems) for p in snapshot.policies if p.policy is None}
    out = Draft()
    d = _decide(snapshot, settings, now, memory, out)
    drains, memo = drain_memo.reuse_or_choose(
        memory.drains, d.drain_policies, snapshot.nodes, snapshot.pods, d.member_of,
        snapshot.pdbs, now, settings.drain_timeout, d.paused, settings.protected_namespaces)
    # A drain under way pauses while its Pods' scheduler cannot schedule: the taint stays, and
    # no Pod keeps the mark its descheduler evicts by (an evictee would wait for the scheduler).
    draining = {key: (p.policy, p.moves.get(key, "")) for p in drains
                if p.policy not in d.waiting for node in p.draining for key in p.evict[node]}
    label_pods(snapshot.pods, d.members, draining, d.health.routes, out)
    landings, landed = follow(memory.landings, snapshot.pods,
                              {k: m.workload.key for k, m in d.members.items()},
                              _marks(draining, d.members, snapshot, drains), now)
    run_hook(d.workloads, d.members, d.node_labels, d.pools, snapshot.pods,
             settings.intent_grace, settings.exempt_schedulers, memory, now, d.waiting, out,
             settings.protected_namespaces, d.readmission, _freeable(drains))
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
                landings)


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
    d = _decide(snapshot, settings, now, Memory(), Draft())

    def choose(pods: Sequence[PodInfo], paused: frozenset[str] = d.waiting) -> list[DrainPlan]:
        return choose_drains(d.drain_policies, snapshot.nodes, pods, d.member_of,
                             snapshot.pdbs, now, settings.drain_timeout, paused,
                             settings.protected_namespaces)

    if not d.paused - d.waiting:
        return eventually(choose, snapshot.pods)
    pods = replay(snapshot.pods, d.members, d.pools, d.node_labels, settings.exempt_schedulers,
                  d.health.routes, snapshot.pdbs, d.readmission,
                  _freeable(choose(snapshot.pods, d.paused)), settings.protected_namespaces)
    return with_replacements(snapshot.pods, pods, eventually(choose, pods), {
        key: m.policy.id for key, m in d.members.items() if m.policy is not None})


def _freeable(drains: Sequence[DrainPlan]) -> frozenset[str]:
    return frozenset(n for p in drains for n in p.freeable)
