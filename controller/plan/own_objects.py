"""The controller's own objects in its namespace: the compaction scheduler's ConfigMap and
Deployment, each policy's descheduler ConfigMap and CronJob, applied only when changed. Pure."""

from __future__ import annotations

import datetime
import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from compaction import kinds, names
from compaction.policy import Policy, SchedulerMode
from compaction.selector import LabelSelector
from controller.components import descheduler
from controller.components import scheduler as scheduler_manifests
from controller.components.pod_settings import scheduler_image
from controller.plan.actions import (
    Apply,
    Delete,
)
from controller.plan.between_passes import Memory
from controller.plan.draft import Draft
from controller.plan.events import namespaced_event
from controller.plan.settings import PlanSettings
from controller.plan.status import (
    run_failed_message,
)
from controller.snapshot.node import NodeInfo
from controller.snapshot.owned import OwnedInfo
from controller.snapshot.owner import OwnerInfo
from controller.snapshot.pod import PodInfo
from controller.snapshot.snapshot import Snapshot


def digest(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def _apply(path: str, body: Mapping[str, Any], present: OwnedInfo | None, memory: Memory,
           out: Draft) -> None:
    """Apply unless this very body was applied and nobody changed the object since."""
    d = digest(body)
    if present is not None and memory.applied.get(path) == (d, present.revision):
        return
    out.actions.append(Apply(path, body, d))


def own_objects(snapshot: Snapshot) -> dict[tuple[str, str], OwnedInfo]:
    return {(o.kind, o.name): o for o in snapshot.own}


def _waiting_on_scheduler(pods: Iterable[PodInfo]) -> int:
    """Unbound Pods that name the compaction scheduler: a Pod's ``schedulerName`` never
    changes, so no other scheduler will ever bind them."""
    return sum(1 for p in pods if p.scheduler_name == names.MANAGED_SCHEDULER and p.unbound)


def apply_scheduler(active: list[Policy], snapshot: Snapshot, settings: PlanSettings,
                    memory: Memory, now: datetime.datetime, out: Draft) -> bool:
    """The compaction scheduler's ConfigMap and Deployment while any policy needs them, or
    any unbound Pod still names the scheduler (it goes only after those are scheduled, with
    an Event); returns whether the scheduler is available."""
    ns, own = settings.namespace, own_objects(snapshot)
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
    extender_image = settings.runtime.extender_image
    cm = scheduler_manifests.scheduler_configmap(ns, with_extender=extender_image is not None)
    image = scheduler_image(settings.runtime.scheduler_image_override, None, None,
                            snapshot.cluster_version)
    config = cm["data"][scheduler_manifests.CONFIG_KEY]
    config_hash = hashlib.sha256(config.encode()).hexdigest()[:12]
    deploy = scheduler_manifests.scheduler_deployment(settings.runtime.scheduler, image,
                                                    config_hash, ns, extender_image)
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


def apply_deschedulers(active: list[Policy], pools: Mapping[str, LabelSelector],
                       observed: Mapping[str, set[str]], managed: Mapping[str, int],
                       snapshot: Snapshot, settings: PlanSettings, memory: Memory, out: Draft
                       ) -> dict[str, int]:
    """Each active descheduler's ConfigMap and CronJob; returns, per policy, how many nodes
    its pool holds. The CronJob is suspended while the policy manages no workload or its
    pool has no node, since a run could do nothing."""
    ns, own = settings.namespace, own_objects(snapshot)
    wanted = {p.id: p for p in active if p.descheduler.enabled}
    sizes: dict[str, int] = {}
    for policy in wanted.values():
        name = names.descheduler_name(policy.id)
        pool = pools[policy.id]
        sizes[policy.id] = sum(1 for n in snapshot.nodes if pool.matches(n.labels))
        doc = descheduler.render_descheduler_policy(policy, observed, ns)
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


def failed_runs(active: list[Policy], snapshot: Snapshot, settings: PlanSettings,
                memory: Memory, now: datetime.datetime, out: Draft) -> dict[str, OwnerInfo]:
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
