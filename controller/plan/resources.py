"""Resource plans in one pass: each workload's static policies composed into the plan its
new Pods get, the Event of a blocked plan, and the resource policies' status. Pure.

Existing Pods are never resized: a Pod created before the plan keeps its resources until its
workload replaces it (a rollout). The webhook stamps the plan's hash on each Pod it admits
under a plan, so the status can count the running Pods that were not.
"""

from __future__ import annotations

import datetime
import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from compaction import names
from compaction.evaluation import Evaluation
from compaction.resource_plan import Composition, compose
from compaction.safety import is_placeholder
from compaction.scope import opted_out
from controller.plan.actions import RecordEvent, WriteStatus
from controller.plan.between_passes import Memory
from controller.plan.events import workload_event
from controller.plan.status import Condition, render_conditions, same_status
from controller.snapshot.fields import format_time
from controller.snapshot.pod import PodInfo
from controller.snapshot.policies import StaticPolicyInfo
from controller.snapshot.snapshot import Snapshot
from controller.snapshot.workload import WorkloadInfo, WorkloadKey


def compositions(snapshot: Snapshot, evaluation: Evaluation
                 ) -> dict[WorkloadKey, Composition]:
    """Every workload's composition; empty while no resource policy is enabled."""
    static = [o.policy for o in snapshot.static_policies
              if o.policy is not None and o.policy.enabled]
    if not static:
        return {}
    out = {}
    for w in snapshot.workloads:
        if w.containers:
            out[w.key] = compose(static, w.view, w.containers, evaluation,
                                 snapshot.limit_ranges.get(w.view.namespace, ()),
                                 w.init_containers)
    return out


def planned(composition: Composition | None) -> str | None:
    """The annotation the workload should carry: the plan, or none (no plan, or blocked)."""
    return composition.plan.rendered if composition and composition.plan else None


@dataclass(frozen=True)
class Blocking:
    events: tuple[RecordEvent, ...] = ()
    newly: Mapping[str, int] = field(default_factory=dict)  # reason -> workloads, this pass


def blocked_events(workloads: Iterable[WorkloadInfo],
                   composed: Mapping[WorkloadKey, Composition], memory: Memory,
                   now: datetime.datetime) -> Blocking:
    """A Warning Event on each workload whose plan is blocked, once per distinct block
    (again hourly while it lasts); ``newly`` counts those recorded now, by reason."""
    events, newly = [], Counter[str]()
    for w in workloads:
        c = composed.get(w.key)
        if c is None or c.blocked is None:
            continue
        digest = hashlib.sha256(c.blocked.message.encode()).hexdigest()[:12]
        key = f"resources-blocked/{w.path}/{digest}"
        if memory.recently(key, now):
            continue
        event = workload_event(w, "ResourcesBlocked", f"resource plan not applied, the Pods "
                               f"keep their resources: {c.blocked.message}", "Warning")
        events.append(RecordEvent(event.namespace, event.body, key))
        newly[c.blocked.reason.value] += 1
    return Blocking(tuple(events), dict(newly))


def _never_resized(pod: PodInfo) -> bool:
    """A Pod the webhook leaves as it asked: a placeholder, or opted out by its label."""
    return is_placeholder(pod.priority) or opted_out(pod.labels)


def static_status(objects: Iterable[StaticPolicyInfo],
                  composed: Mapping[WorkloadKey, Composition],
                  pods: Iterable[tuple[PodInfo, WorkloadKey]],
                  now: datetime.datetime) -> list[WriteStatus]:
    """Each resource policy's status: the workloads it contributes to, those blocked, the
    running Pods of its workloads not created under the current plan, and conditions.
    Placeholders and opted-out Pods are admitted without the plan on purpose, so they never
    count as differing: a rollout brings the count to 0."""
    differing: Counter[WorkloadKey] = Counter()
    for pod, key in pods:
        c = composed.get(key)
        if c is None or c.plan is None or pod.phase != "Running" or _never_resized(pod):
            continue
        if pod.annotations.get(names.RESOURCES_HASH_ANNOTATION) != c.plan.hash:
            differing[key] += 1
    stamp = format_time(now)
    out = []
    for obj in objects:
        mine = {k: c for k, c in composed.items() if obj.key in c.policies}
        blocked = sorted((k, c) for k, c in mine.items() if c.blocked is not None)
        if obj.policy is None:
            conditions = [Condition("Valid", False, "InvalidSpec",
                                    "; ".join(map(str, obj.problems))[:2000])]
        else:
            conditions = [Condition("Valid", True, "Valid", "spec is valid")]
        if blocked:
            (kind, ns, name), first = blocked[0]
            assert first.blocked is not None
            more = f" (and {len(blocked) - 1} more)" if len(blocked) > 1 else ""
            conditions.append(Condition("ResourcesBlocked", True, first.blocked.reason.value,
                                        f"{kind} {ns}/{name}: {first.blocked.message}{more}"
                                        [:2000]))
        else:
            conditions.append(Condition("ResourcesBlocked", False, "NoneBlocked",
                                        "every plan this policy contributes to applies"))
        body = {"observedGeneration": obj.generation, "workloads": len(mine),
                "blockedWorkloads": len(blocked),
                "podsDiffering": sum(differing[k] for k in mine),
                "conditions": render_conditions(conditions, obj.status.get("conditions") or [],
                                                obj.generation, stamp)}
        if not same_status(obj.status, body):
            out.append(WriteStatus(obj.status_path, body))
    return out
