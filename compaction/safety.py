"""What Compactor may move: one rule for the runtime hook, the drain planner and the
descheduler config.

Eviction by workload kind follows the reference's workload table: Deployment and StatefulSet
Pods only, DaemonSet Pods only when the policy sets ``evictDaemonSetPods``. Every other kind
(CronJob, Job, Argo Rollout and AnalysisRun, StrimziPodSet, KubeAI Model) keeps its Pods: a
Job's Pod would lose its work, the others' controllers recreate Pods in ways a plain eviction
cannot count on. Placeholders (priority at or below -10, the Cluster Autoscaler's convention
for overprovisioning Pods) are never evicted, re-admitted, resized or patched: their requests
are the headroom someone reserved on purpose.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final, Protocol

from compaction import names
from compaction.policy import DefaultEvictor
from compaction.workload import WorkloadType

EVICTABLE_KINDS: Final = frozenset({WorkloadType.DEPLOYMENT, WorkloadType.STATEFUL_SET})
# cluster-autoscaler.kubernetes.io/safe-to-evict values that keep a Pod where it is.
UNSAFE_TO_EVICT: Final = frozenset({"false", "on-completion"})
SYSTEM_CRITICAL: Final = frozenset({"system-cluster-critical", "system-node-critical"})
# kube-scheduler's floor for system-critical priorities (scheduling.SystemCriticalPriority).
_CRITICAL_PRIORITY: Final = 2_000_000_000


class Hold(StrEnum):
    """Why a Pod is never evicted by Compactor, whatever its node; the value is the code
    metrics and status use."""

    PROTECTED_NAMESPACE = "protected_namespace"
    MIRROR = "mirror"
    PLACEHOLDER = "placeholder"
    BARE_POD = "bare_pod"
    KIND_NOT_EVICTED = "kind_not_evicted"
    SAFE_TO_EVICT = "safe_to_evict"
    DO_NOT_DISRUPT = "do_not_disrupt"
    SYSTEM_CRITICAL = "system_critical"
    LOCAL_STORAGE = "local_storage"
    PVC = "pvc"


class PodFacts(Protocol):
    """What the rule reads of a Pod (``controller.snapshot.snapshot.PodInfo`` has it)."""

    @property
    def namespace(self) -> str: ...
    @property
    def annotations(self) -> Mapping[str, str]: ...
    @property
    def owner(self) -> tuple[str, str] | None: ...
    @property
    def priority(self) -> int | None: ...
    @property
    def priority_class_name(self) -> str: ...
    @property
    def local_storage(self) -> bool: ...
    @property
    def pvc(self) -> bool: ...


def evictable_kinds(evict_daemon_set_pods: bool) -> frozenset[WorkloadType]:
    if evict_daemon_set_pods:
        return EVICTABLE_KINDS | {WorkloadType.DAEMON_SET}
    return EVICTABLE_KINDS


def is_placeholder(priority: Any) -> bool:
    """Placeholder headroom: a resolved ``spec.priority`` at or below -10."""
    return (isinstance(priority, int) and not isinstance(priority, bool)
            and priority <= names.PLACEHOLDER_PRIORITY)


def unsafe_to_evict(annotations: Mapping[str, Any]) -> bool:
    return annotations.get(names.SAFE_TO_EVICT_ANNOTATION) in UNSAFE_TO_EVICT


def do_not_disrupt(annotations: Mapping[str, Any]) -> bool:
    """Karpenter's ``karpenter.sh/do-not-disrupt: "true"``: its users expect every
    autoscaler to leave the Pod where it is."""
    return annotations.get(names.DO_NOT_DISRUPT_ANNOTATION) == "true"


def is_system_critical(priority_class_name: str, priority: int | None) -> bool:
    return priority_class_name in SYSTEM_CRITICAL or (
        priority is not None and priority >= _CRITICAL_PRIORITY)


def untouched(namespace: str, mirror: bool, priority: Any,
              protected: frozenset[str] = names.PROTECTED_NAMESPACES) -> Hold | None:
    """Pods Compactor never patches, re-admits or evicts, whatever policy covers them: in a
    ``protected`` namespace (``names.protected_namespaces`` of the install namespace), mirror
    Pods, placeholders. The webhook's first question, and the first part of
    ``eviction_hold``."""
    if namespace in protected:
        return Hold.PROTECTED_NAMESPACE
    if mirror:
        return Hold.MIRROR
    if is_placeholder(priority):
        return Hold.PLACEHOLDER
    return None


def eviction_hold(pod: PodFacts, kind: WorkloadType | None, evictor: DefaultEvictor,
                  protected: frozenset[str] = names.PROTECTED_NAMESPACES) -> Hold | None:
    """Why ``pod``, of a ``kind`` workload (None: no workload), may never be evicted under a
    policy with these evictor settings; None when it may. The first reason, in a fixed
    order, so that every caller names the same one."""
    hold = untouched(pod.namespace, names.MIRROR_ANNOTATION in pod.annotations, pod.priority,
                     protected)
    if hold is not None:
        return hold
    if pod.owner is None:
        return Hold.BARE_POD
    if kind is None or kind not in evictable_kinds(evictor.evict_daemon_set_pods):
        return Hold.KIND_NOT_EVICTED
    if unsafe_to_evict(pod.annotations):
        return Hold.SAFE_TO_EVICT
    if do_not_disrupt(pod.annotations):
        return Hold.DO_NOT_DISRUPT
    if is_system_critical(pod.priority_class_name, pod.priority) and \
            not evictor.evict_system_critical_pods:
        return Hold.SYSTEM_CRITICAL
    if pod.local_storage and not evictor.evict_local_storage_pods:
        return Hold.LOCAL_STORAGE
    if pod.pvc and evictor.ignore_pvc_pods:
        return Hold.PVC
    return None
