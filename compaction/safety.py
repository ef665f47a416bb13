"""What Compactor may move, shared by the runtime hook, the descheduler config and admission.

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
from typing import Any, Final

from compaction import names
from compaction.workload import WorkloadType

EVICTABLE_KINDS: Final = frozenset({WorkloadType.DEPLOYMENT, WorkloadType.STATEFUL_SET})
# cluster-autoscaler.kubernetes.io/safe-to-evict values that keep a Pod where it is.
UNSAFE_TO_EVICT: Final = frozenset({"false", "on-completion"})


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
