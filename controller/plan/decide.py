"""One pass's decisions: ``plan(snapshot, settings, now, memory) -> Plan``. Pure.

From what the reader saw, in this order: each workload's policy and metadata, the stale
copies on intermediate owners, the drain plan across every policy
(``controller.drain_planner.planner``), each Pod's metadata, the runtime hook, the drain taints on
nodes, the compaction scheduler's objects, each policy's descheduler objects, and the policies'
status. Nothing here does I/O; ``controller.act.executor`` carries the plan out.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from compaction import kinds, names
from compaction.evaluation import DEFAULT, KNOWN_TYPES, Evaluation, default_manifest
from compaction.intent import Intent
from compaction.policy import Policy, SchedulerMode
from compaction.precedence import select
from compaction.resource_plan import Composition
from compaction.selector import LabelSelector
from compaction.workload import WorkloadType
from controller.components import descheduler
from controller.components import scheduler as scheduler_manifests
from controller.components.pod_settings import RuntimeSettings, scheduler_image
from controller.drain_planner import memo as drain_memo
from controller.drain_planner.drain_plan import DRAIN_TIMEOUT, DrainPlan, Member
from controller.drain_planner.planner import plan_drains
from controller.plan import last_valid_spec, resources, runtime_hook, scheduler_routing
from controller.plan.actions import (
    Action,
    Apply,
    Create,
    Delete,
    Patch,
    Plan,
    Target,
    WriteStatus,
)
from controller.plan.between_passes import Memory
from controller.plan.convergence import awaits_replacement
from controller.plan.events import namespaced_event, workload_event
from controller.plan.pod_metadata import OwnerIndex, pod_patch, stale_copies
from controller.plan.scheduler_routing import DOWN_AFTER, RECOVERY, STRANDED_AFTER, SchedulerHealth
from controller.plan.status import (
    Condition,
    invalid_conditions,
    policy_conditions,
    render_conditions,
    run_failed_message,
    same_status,
    status_body,
)
from controller.plan.taint_life import plan_taints
from controller.plan.workload_metadata import intent_of, workload_patch
from controller.snapshot.fields import format_time
from controller.snapshot.node import NodeInfo
from controller.snapshot.owned import OwnedInfo
from controller.snapshot.owner import OwnerInfo
from controller.snapshot.pdb import PdbInfo
from controller.snapshot.pod import PodInfo
from controller.snapshot.policies import EvaluationInfo, PolicyInfo
from controller.snapshot.snapshot import Snapshot
from controller.snapshot.workload import WorkloadInfo

WorkloadKey = tuple[str, str, str]


@dataclass(frozen=True)
class PlanSettings:
    runtime: RuntimeSettings
    namespace: str = names.INSTALL_NAMESPACE
    intent_grace: datetime.timedelta = runtime_hook.INTENT_GRACE
    drain_timeout: datetime.timedelta = DRAIN_TIMEOUT
    # Create the default PolicyEvaluation when the cluster has none.
    default_evaluation: bool = True
    # Schedulers a Pod keeps when it names one (the webhook's setting of the same name).
    exempt_schedulers: frozenset[str] = names.EXEMPT_SCHEDULERS
    # The compaction scheduler's health (controller.plan.scheduler_routing): without an available
    # replica this long, new Pods go to the default scheduler; back to it once available
    # this long; Pods left Pending on it this long while it is down are replaced.
    scheduler_down_after: datetime.timedelta = DOWN_AFTER
    scheduler_recovery: datetime.timedelta = RECOVERY
    stranded_after: datetime.timedelta = STRANDED_AFTER


@dataclass
class _Pass:
    """The plan as it grows; frozen into a ``Plan`` at the end."""

    actions: list[Action] = field(default_factory=list)
    managed: Counter[str] = field(default_factory=Counter)
    suppressed: int = 0
    suppressions: int = 0
    skipped: int = 0
    selections: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Decided:
    """What a pass decides before it plans drains, and what the rest of it reads."""

    active: list[Policy]
    evaluation: Evaluation
    health: SchedulerHealth
    composed: Mapping[WorkloadKey, Composition]
    workloads: Mapping[WorkloadKey, tuple[WorkloadInfo, Policy | None]]
    members: Mapping[tuple[str, str], _Membership]
    blocked: Mapping[str, int]  # resource plans found blocked now, by reason
    observed: Mapping[str, set[str]]
    pools: Mapping[str, LabelSelector]
    node_labels: Mapping[str, Mapping[str, str]]
    waiting: frozenset[str]  # policies whose drains wait for the scheduler
    paused: frozenset[str]  # policies that start no drain now

    @property
    def drain_policies(self) -> list[tuple[Policy, LabelSelector]]:
        return [(p, self.pools[p.id]) for p in self.active]

    @property
    def member_of(self) -> dict[tuple[str, str], Member]:
        return {k: m.member for k, m in self.members.items()}


def _decide(snapshot: Snapshot, settings: PlanSettings, now: datetime.datetime,
            memory: Memory, out: _Pass) -> _Decided:
    active = [p.acting for p in snapshot.policies if p.acting is not None and p.acting.enabled]
    evaluation = snapshot.evaluation.evaluation if snapshot.evaluation else DEFAULT
    _evaluation(snapshot.evaluation, settings, now, out)
    health, fell_back = scheduler_routing.assess(
        snapshot.policies, _own(snapshot).get(("Deployment", scheduler_manifests.DEPLOYMENT)),
        any(p.scheduler.mode is SchedulerMode.MANAGED for p in active), snapshot.pods,
        settings.namespace, now, settings.scheduler_down_after, settings.scheduler_recovery)
    up = health.routes
    out.actions += scheduler_routing.routing_events(
        health, fell_back, settings.namespace, scheduler_manifests.DEPLOYMENT,
        settings.scheduler_recovery)
    composed = resources.compositions(snapshot, evaluation)
    decided = _workloads(snapshot.workloads, active, evaluation, composed, up, out)
    index = OwnerIndex.build(snapshot.owners)
    _stale_copies(index, decided, composed, up, out)
    members = _membership(snapshot.pods, index, decided)
    blocking = resources.blocked_events(snapshot.workloads, composed, memory, now)
    out.actions.extend(blocking.events)
    observed = label_values(snapshot.nodes)
    pools = {p.id: descheduler.node_pool(p, observed) for p in active}
    node_labels = {n.name: n.labels for n in snapshot.nodes}
    # Policies that start no drain now: their runtime hook still has Pods to replace, or
    # their scheduler cannot schedule (a drain's evictees would wait for it).
    waiting = frozenset() if up else frozenset(
        p.id for p in active if p.scheduler.mode is SchedulerMode.MANAGED)
    paused = frozenset(waiting | _converging(snapshot.pods, members, pools, node_labels,
                                             settings.exempt_schedulers, up, snapshot.pdbs))
    return _Decided(active, evaluation, health, composed, decided, members, blocking.newly,
                    observed, pools, node_labels, waiting, paused)


def plan(snapshot: Snapshot, settings: PlanSettings, now: datetime.datetime,
         memory: Memory | None = None) -> Plan:
    memory = memory or Memory()
    invalid = {p.key: list(p.problems) for p in snapshot.policies if p.policy is None}
    out = _Pass()
    d = _decide(snapshot, settings, now, memory, out)
    drains, memo = drain_memo.reuse_or_plan(
        memory.drains, d.drain_policies, snapshot.nodes, snapshot.pods, d.member_of,
        snapshot.pdbs, now, settings.drain_timeout, d.paused)
    draining = {key: p.policy for p in drains for node in p.draining for key in p.evict[node]}
    _pods(snapshot.pods, d.members, draining, d.health.routes, out)
    _runtime_hook(d.workloads, d.members, d.node_labels, d.pools, snapshot.pods, settings,
                  memory, now, d.waiting, out)
    stranded = scheduler_routing.stranded(
        snapshot.pods, d.members, d.health, now, settings.scheduler_down_after,
        settings.intent_grace, settings.stranded_after)
    out.actions += stranded
    out.actions += plan_taints(snapshot.nodes, drains, {p.id: p for p in d.active}, memory,
                               now)
    _scheduler(d.active, snapshot, settings, memory, now, out)
    sizes = _deschedulers(d.active, d.pools, d.observed, out.managed, snapshot, settings,
                          memory, out)
    failed = _failed_runs(d.active, snapshot, settings, memory, now, out)
    _status(snapshot.policies, out.managed, d.health, settings, sizes,
            {p.policy: p for p in drains}, failed, memory, now, out)
    out.actions.extend(resources.static_status(
        snapshot.static_policies, d.composed,
        ((pod, m.workload.key) for pod in snapshot.pods if (m := d.members.get(pod.key))),
        now))
    return Plan(tuple(out.actions), dict(out.managed), invalid, out.suppressed,
                out.suppressions, out.skipped, tuple(drains), tuple(out.selections),
                d.blocked, memo, d.health.routing.value, len(stranded))


def drain_plans(snapshot: Snapshot, settings: PlanSettings,
                now: datetime.datetime) -> tuple[DrainPlan, ...]:
    """The drains ``plan`` would start from ``snapshot`` with nothing to reuse, and nothing
    else: for a reader that carries no action out (the preview), which would otherwise pay
    for every Pod's labels, the runtime hook and the digest kept for the next pass."""
    d = _decide(snapshot, settings, now, Memory(), _Pass())
    return tuple(plan_drains(d.drain_policies, snapshot.nodes, snapshot.pods, d.member_of,
                             snapshot.pdbs, now, settings.drain_timeout, d.paused))


# --- workloads ----------------------------------------------------------------------


def _workloads(workloads: Iterable[WorkloadInfo], active: list[Policy],
               evaluation: Evaluation, composed: Mapping[WorkloadKey, Composition],
               up: bool, out: _Pass) -> dict[WorkloadKey, tuple[WorkloadInfo, Policy | None]]:
    decided: dict[WorkloadKey, tuple[WorkloadInfo, Policy | None]] = {}
    for w in workloads:
        selection = select(active, w.view, evaluation)
        policy = selection.winner
        decided[w.key] = (w, policy)
        if policy is not None:
            out.managed[policy.id] += 1
        patch = workload_patch(w, intent_of(policy, w.view.kind, up),
                               resources.planned(composed.get(w.key)))
        if patch is None:
            continue
        before, after = w.labels.get(names.POLICY_LABEL), policy.id if policy else None
        event: tuple[Action, ...] = ()
        if before != after:
            message = (f"no compaction policy applies any more (was {before!r})"
                       if policy is None else
                       selection.summary() + (f" (was {before!r})" if before else ""))
            event = (workload_event(w, "CompactionPolicyChanged", message),)
            out.selections.append(f"{w.view.kind.value} {w.view.namespace}/{w.view.name}: "
                                  f"{message}")
        out.actions.append(Patch(w.path, patch, Target.WORKLOAD, then=event))
    return decided


def _wanted_annotations(w: WorkloadInfo, policy: Policy | None,
                        plan: str | None, up: bool) -> dict[str, str]:
    """The workload's annotations once this pass has patched it."""
    wanted = dict(w.annotations)
    intent = intent_of(policy, w.view.kind, up)
    for key, value in ((names.INTENT_ANNOTATION, intent.render() if intent else None),
                       (names.RESOURCES_ANNOTATION, plan)):
        if value is None:
            wanted.pop(key, None)
        else:
            wanted[key] = value
    return wanted


def _stale_copies(index: OwnerIndex,
                  decided: Mapping[WorkloadKey, tuple[WorkloadInfo, Policy | None]],
                  composed: Mapping[WorkloadKey, Composition], up: bool, out: _Pass) -> None:
    """Our annotations on ReplicaSets (and a CronJob's Jobs) that their workload no longer
    carries are removed, so that ``kubectl`` shows the truth there too."""
    for key, parent in index.intermediates():
        if parent not in decided:
            continue
        ops = stale_copies(index.annotations.get(key, {}), _wanted_annotations(
            *decided[parent], resources.planned(composed.get(parent)), up))
        if ops:
            out.actions.append(Patch(kinds.kind(key[0]).path(key[1], key[2]), ops,
                                     Target.STALE_COPY, "json", frozenset({404, 422})))


# --- pods ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Membership:
    """A Pod's workload, as this pass decided it."""

    workload: WorkloadInfo
    policy: Policy | None

    @functools.cached_property
    def member(self) -> Member:
        """The planner's view; one per workload, shared by all its Pods."""
        return Member(self.workload.view.kind, self.policy.id if self.policy else None,
                      self.workload.suppressed)


def _membership(pods: Iterable[PodInfo], index: OwnerIndex,
                decided: Mapping[WorkloadKey, tuple[WorkloadInfo, Policy | None]]
                ) -> dict[tuple[str, str], _Membership]:
    out: dict[tuple[str, str], _Membership] = {}
    by_owner: dict[tuple[str, tuple[str, str] | None], _Membership | None] = {}
    for pod in pods:
        if pod.namespace in names.PROTECTED_NAMESPACES or pod.deleting:
            continue
        owner = (pod.namespace, pod.owner)  # a workload's Pods share their owner: look up once
        if owner not in by_owner:
            key = index.workload(pod)
            found = decided.get(key) if key is not None else None
            by_owner[owner] = _Membership(*found) if found is not None else None
        if (m := by_owner[owner]) is not None:
            out[pod.key] = m
    return out


def _pods(pods: Iterable[PodInfo], members: Mapping[tuple[str, str], _Membership],
          draining: Mapping[tuple[str, str], str], up: bool, out: _Pass) -> None:
    intents: dict[tuple[str, WorkloadType], Intent | None] = {}
    pod_kind = kinds.kind("Pod")
    for pod in pods:
        m = members.get(pod.key)
        if m is None:
            continue
        which = (m.policy.id if m.policy else "", m.workload.view.kind)
        if which not in intents:
            intents[which] = intent_of(m.policy, m.workload.view.kind, up)
        patch = pod_patch(pod, intents[which], m.workload.suppressed, draining.get(pod.key))
        if patch is not None:
            out.actions.append(Patch(pod_kind.path(pod.namespace, pod.name), patch, Target.POD))


def _converging(pods: Iterable[PodInfo], members: Mapping[tuple[str, str], _Membership],
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
        if any(pdb.covers(pod) and pdb.disruptions_allowed <= 0 for pdb in pdbs):
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


def _runtime_hook(decided: Mapping[WorkloadKey, tuple[WorkloadInfo, Policy | None]],
                  members: Mapping[tuple[str, str], _Membership],
                  node_labels: Mapping[str, Mapping[str, str]],
                  pools: Mapping[str, LabelSelector], pods: Iterable[PodInfo],
                  settings: PlanSettings, memory: Memory, now: datetime.datetime,
                  waiting: frozenset[str], out: _Pass) -> None:
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
                                       pools[policy.id], memory, now, settings.intent_grace,
                                       settings.exempt_schedulers)
        out.actions += decision.actions
        out.suppressed += decision.suppressed
        out.suppressions += decision.newly_suppressed
        out.skipped += decision.skipped


# --- the controller's own objects ------------------------------------------------------


def digest(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def _apply(path: str, body: Mapping[str, Any], present: OwnedInfo | None, memory: Memory,
           out: _Pass) -> None:
    """Apply unless this very body was applied and nobody changed the object since."""
    d = digest(body)
    if present is not None and memory.applied.get(path) == (d, present.revision):
        return
    out.actions.append(Apply(path, body, d))


def _own(snapshot: Snapshot) -> dict[tuple[str, str], OwnedInfo]:
    return {(o.kind, o.name): o for o in snapshot.own}


def _waiting_on_scheduler(pods: Iterable[PodInfo]) -> int:
    """Unbound Pods that name the compaction scheduler: a Pod's ``schedulerName`` never
    changes, so no other scheduler will ever bind them."""
    return sum(1 for p in pods if p.scheduler_name == names.MANAGED_SCHEDULER and p.unbound)


def _scheduler(active: list[Policy], snapshot: Snapshot, settings: PlanSettings,
               memory: Memory, now: datetime.datetime, out: _Pass) -> bool:
    """The compaction scheduler's ConfigMap and Deployment while any policy needs them, or
    any unbound Pod still names the scheduler (it goes only after those are scheduled, with
    an Event); returns whether the scheduler is available."""
    ns, own = settings.namespace, _own(snapshot)
    objects = (("ConfigMap", names.SCHEDULER_CONFIGMAP),
               ("Deployment", scheduler_manifests.DEPLOYMENT))
    waiting = _waiting_on_scheduler(snapshot.pods)
    if not any(p.scheduler.mode is SchedulerMode.MANAGED for p in active):
        present = [(kind, name) for kind, name in objects if (kind, name) in own]
        if not present:
            return False
        if not waiting:
            out.actions += [Delete(kinds.kind(kind).path(ns, name)) for kind, name in present]
            out.actions.append(namespaced_event(
                "Deployment", ns, scheduler_manifests.DEPLOYMENT, "", "CompactionSchedulerRemoved",
                "no policy uses the compaction scheduler and no Pod waits for it"))
            return False
        key = "scheduler/kept"
        if not memory.recently(key, now):
            out.actions.append(namespaced_event(
                "Deployment", ns, scheduler_manifests.DEPLOYMENT, "", "CompactionSchedulerKept",
                f"no policy uses the compaction scheduler, but {waiting} unbound Pod(s) name "
                f"{names.MANAGED_SCHEDULER}: it stays until they are scheduled", key=key))
    cm = scheduler_manifests.scheduler_configmap(ns)
    image = scheduler_image(settings.runtime.scheduler_image_override, None, None,
                            snapshot.cluster_version)
    config = cm["data"][scheduler_manifests.CONFIG_KEY]
    config_hash = hashlib.sha256(config.encode()).hexdigest()[:12]
    deploy = scheduler_manifests.scheduler_deployment(settings.runtime.scheduler, image,
                                                    config_hash, ns)
    for (kind, name), body in zip(objects, (cm, deploy), strict=True):
        _apply(kinds.kind(kind).path(ns, name), body, own.get((kind, name)), memory, out)
    current = own.get(("Deployment", scheduler_manifests.DEPLOYMENT))
    return current is not None and current.available_replicas > 0


def label_values(nodes: Iterable[NodeInfo]) -> dict[str, set[str]]:
    """Every value each node label has somewhere in the cluster (for wildcard expansion)."""
    values: dict[str, set[str]] = defaultdict(set)
    for node in nodes:
        for k, v in node.labels.items():
            values[k].add(v)
    return values


def _deschedulers(active: list[Policy], pools: Mapping[str, LabelSelector],
                  observed: Mapping[str, set[str]], managed: Mapping[str, int],
                  snapshot: Snapshot, settings: PlanSettings, memory: Memory, out: _Pass
                  ) -> dict[str, int]:
    """Each active descheduler's ConfigMap and CronJob; returns, per policy, how many nodes
    its pool holds. The CronJob is suspended while the policy manages no workload or its
    pool has no node, since a run could do nothing."""
    ns, own = settings.namespace, _own(snapshot)
    wanted = {p.id: p for p in active if p.descheduler.enabled}
    sizes: dict[str, int] = {}
    for policy in wanted.values():
        name = names.descheduler_name(policy.id)
        pool = pools[policy.id]
        sizes[policy.id] = sum(1 for n in snapshot.nodes if pool.matches(n.labels))
        doc = descheduler.render_descheduler_policy(policy, observed)
        idle = managed.get(policy.id, 0) == 0 or sizes[policy.id] == 0
        for kind, body in (
                ("ConfigMap", descheduler.descheduler_configmap(policy, doc, ns)),
                ("CronJob", descheduler.descheduler_cronjob(
                    policy, settings.runtime.descheduler, suspend=idle, namespace=ns))):
            _apply(kinds.kind(kind).path(ns, name), body, own.get((kind, name)), memory, out)
    # What no active policy wants any more: a disabled or deleted policy's (a deleted
    # cluster policy's objects also go through their ownerReferences; a namespaced policy's
    # cannot have any, so this is what removes them).
    for obj in snapshot.own:
        if (obj.labels.get("app.kubernetes.io/component") == "descheduler"
                and obj.policy not in wanted):
            out.actions.append(Delete(kinds.kind(obj.kind).path(ns, obj.name)))
    return sizes


def _failed_runs(active: list[Policy], snapshot: Snapshot, settings: PlanSettings,
                 memory: Memory, now: datetime.datetime, out: _Pass) -> dict[str, OwnerInfo]:
    """Each active descheduler whose last run failed, with a Warning Event on its CronJob
    once per failed Job (repeated at most hourly while it is the last)."""
    failed = {}
    for policy in active:
        if not policy.descheduler.enabled:
            continue
        cronjob = names.descheduler_name(policy.id)
        job = descheduler.failed_run(snapshot.owners, settings.namespace, cronjob)
        if job is None:
            continue
        failed[policy.id] = job
        key = f"descheduler/failed/{job.name}"
        if not memory.recently(key, now):
            out.actions.append(namespaced_event(
                "CronJob", settings.namespace, cronjob, "", "DeschedulerRunFailed",
                run_failed_message(job), "Warning", key=key))
    return failed


# --- status ---------------------------------------------------------------------------


def _plan_status(d: DrainPlan) -> dict[str, Any]:
    return {"nodesInUse": len(d.nodes_in_use), "freeable": len(d.freeable),
            "draining": len(d.draining), "freeableNodes": list(d.freeable),
            "drainingNodes": list(d.draining),
            "unremovable": [{"node": u.node, "reasons": [r.text for r in u.reasons]}
                            for u in (*d.abandoned, *d.unremovable)][:50]}


def _status(policies: Iterable[PolicyInfo], managed: Mapping[str, int],
            health: SchedulerHealth, settings: PlanSettings,
            pools: Mapping[str, int], drains: Mapping[str, DrainPlan],
            failed_runs: Mapping[str, OwnerInfo], memory: Memory,
            now: datetime.datetime, out: _Pass) -> None:
    """Each policy's status. A valid one keeps its spec there as the last valid one; one
    that turned invalid acts on that (say its conditions, with an Event per bad edit), so
    that a bad edit never tears down what the policy set up."""
    stamp = format_time(now)
    for obj in policies:
        previous = obj.status.get("conditions") or []
        policy = obj.acting
        if policy is None:
            conditions = invalid_conditions(obj.problems)
            body = status_body(False, None, None, 0, obj.generation,
                               render_conditions(conditions, previous, obj.generation, stamp))
        else:
            count = managed.get(obj.id, 0)
            conditions = policy_conditions(policy, health, settings.scheduler_recovery,
                                           pools.get(obj.id), count, failed_runs.get(obj.id))
            if obj.policy is None:
                conditions[0], events = last_valid_spec.kept(obj, memory, now)
                out.actions += events
            body = status_body(policy.enabled, policy.scheduler.scheduler_name,
                               policy.scheduler.mode.value, count, obj.generation,
                               render_conditions(conditions, previous, obj.generation, stamp))
            body.update(last_valid_spec.status_fields(obj))
            if obj.id in drains:
                body["plan"] = _plan_status(drains[obj.id])
        if not same_status(obj.status, body):
            out.actions.append(WriteStatus(obj.status_path, body))


def _evaluation(present: EvaluationInfo | None, settings: PlanSettings,
                now: datetime.datetime, out: _Pass) -> None:
    """The default PolicyEvaluation while none exists (created, never overwritten), and the
    status of the one that does: its types, known and unknown, and whether it is valid."""
    if present is None:
        if settings.default_evaluation:
            out.actions.append(Create(kinds.kind(names.EVALUATION_KIND).path(),
                                      default_manifest()))
        return
    e = present.evaluation
    valid = (Condition("Valid", False, "InvalidSpec",
                       "; ".join(map(str, present.problems))[:2000] + "; the rest is used")
             if present.problems else
             Condition("Valid", True, "Valid",
                       "precedence is valid" + (f"; not implemented by Compactor, so ranking "
                                                f"nothing: {', '.join(e.unknown)}"
                                                if e.unknown else "")))
    stamp = format_time(now)
    body = {"observedGeneration": e.generation,
            # Every type Compactor ranks, with the priority in force (the default when the
            # object leaves it out).
            "knownTypes": [{"type": t, "priority": e.priority(t),
                            "source": "spec" if t in e.known else "default"}
                           for t in KNOWN_TYPES],
            "unknownTypes": list(e.unknown),
            "conditions": render_conditions([valid], present.status.get("conditions") or [],
                                            e.generation, stamp)}
    if not same_status(present.status, body):
        out.actions.append(WriteStatus(kinds.kind(names.EVALUATION_KIND).path(
            name=names.EVALUATION_NAME, subresource="status"), body))


