"""``ClusterCompactionPolicy`` and the namespaced ``CompactionPolicy``: the parsed model, with
every default in one place.

Defaults and field names follow the reference field table exactly. ``compaction.validation``
reads an object into this model, taking each default from here. A ``CompactionPolicy`` is the
same model with a namespace: it covers that namespace only.
"""

from __future__ import annotations

import datetime
import fnmatch
import hashlib
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from compaction import names
from compaction.selector import LabelSelector
from compaction.workload import DEFAULT_WORKLOAD_TYPES, WorkloadType

DEFAULT_INTERVAL: Final = "*/30 * * * *"
DEFAULT_LOOP_WINDOW: Final = datetime.timedelta(minutes=15)
# How long a Pod that replaced one Compactor evicted runs before Compactor may evict it: longer
# than a few passes of the runtime hook and the drains (seconds apart), so nothing ping-pongs.
DEFAULT_EVICT_REPLACEMENTS_AFTER: Final = datetime.timedelta(minutes=5)


class NamespaceOperator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"


class SchedulerMode(StrEnum):
    MANAGED = "managed"
    EXTERNAL = "external"
    DESCHEDULER_ONLY = "descheduler-only"


@dataclass(frozen=True)
class NamespaceSelector:
    operator: NamespaceOperator
    values: tuple[str, ...]

    def matches(self, namespace: str) -> bool:
        hit = any(fnmatch.fnmatchcase(namespace, v) for v in self.values)
        return hit if self.operator is NamespaceOperator.IN else not hit

    @property
    def has_wildcards(self) -> bool:
        return any("*" in v for v in self.values)


@dataclass(frozen=True)
class Scope:
    namespace_selector: NamespaceSelector | None = None
    label_selector: LabelSelector | None = None
    workload_types: tuple[WorkloadType, ...] = DEFAULT_WORKLOAD_TYPES


@dataclass(frozen=True)
class SchedulerSpec:
    use_managed_scheduler: bool = True
    external_scheduler_name: str = ""

    @property
    def mode(self) -> SchedulerMode:
        if self.use_managed_scheduler:
            return SchedulerMode.MANAGED
        return SchedulerMode.EXTERNAL if self.external_scheduler_name else (
            SchedulerMode.DESCHEDULER_ONLY)

    @property
    def scheduler_name(self) -> str | None:
        """The schedulerName new Pods get; None in descheduler-only mode."""
        if self.use_managed_scheduler:
            return names.MANAGED_SCHEDULER
        return self.external_scheduler_name or None


@dataclass(frozen=True)
class Thresholds:
    cpu: float = 25
    memory: float = 25
    pods: float = 100


@dataclass(frozen=True)
class HighNodeUtilization:
    number_of_nodes: int = 0
    thresholds: Thresholds = Thresholds()


@dataclass(frozen=True)
class DefaultEvictor:
    node_fit: bool = True
    evict_system_critical_pods: bool = False
    evict_local_storage_pods: bool = False
    ignore_pvc_pods: bool = True
    evict_daemon_set_pods: bool = False
    label_selector: LabelSelector = LabelSelector()


@dataclass(frozen=True)
class DeschedulerSpec:
    enabled: bool = True
    node_selector: LabelSelector = LabelSelector()
    max_pods_to_evict_per_node: int = 1
    max_pods_to_evict_per_namespace: int = 1
    max_pods_to_evict_total: int = 1
    # How many nodes the planner drains at once (a Compactor extension of the field table).
    max_draining_nodes: int = 1
    # The most evictions the planner may spend to free one node; None: no limit (a Compactor
    # extension of the field table).
    max_evictions_to_free_node: int | None = None
    default_evictor: DefaultEvictor = DefaultEvictor()
    high_node_utilization: HighNodeUtilization = HighNodeUtilization()
    interval: str = DEFAULT_INTERVAL
    loop_detection_window: datetime.timedelta = DEFAULT_LOOP_WINDOW
    loop_detection_threshold: int = 3
    # The reference: suppressionDuration defaults to loopDetectionWindow.
    suppression_duration: datetime.timedelta = DEFAULT_LOOP_WINDOW
    # A Pod created after Compactor evicted one of its workload's is not evicted by Compactor
    # until it has run this long (0: no such rule). A Compactor extension of the field table.
    evict_replacements_after: datetime.timedelta = DEFAULT_EVICT_REPLACEMENTS_AFTER


@dataclass(frozen=True)
class PolicyBase:
    """What a policy of every kind has: identity, whether it takes part, weight and scope."""

    name: str
    namespace: str = ""  # set for a namespaced kind, which covers this namespace only
    uid: str = ""
    generation: int = 0
    creation_timestamp: datetime.datetime | None = None
    enabled: bool = True
    weight: int = 0
    scope: Scope = Scope()

    @property
    def kind(self) -> str:
        raise NotImplementedError

    @property
    def key(self) -> str:
        """``<Kind>/<name>``, or ``<Kind>/<namespace>/<name>``: unique, and how people and
        the last rule of precedence tell policies apart."""
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind}/{where}{self.name}"


@dataclass(frozen=True)
class Policy(PolicyBase):
    scheduler: SchedulerSpec = SchedulerSpec()
    set_labels_by_eviction: bool = False
    descheduler: DeschedulerSpec = DeschedulerSpec()

    @property
    def kind(self) -> str:
        return names.NAMESPACED_POLICY_KIND if self.namespace else names.POLICY_KIND

    @property
    def id(self) -> str:
        """What Pods, workloads, taints and the descheduler's objects name the policy by:
        ``policy_id``."""
        return policy_id(self.namespace, self.name)


@dataclass(frozen=True)
class Reserved:
    """A field a namespaced policy may not set (``allowed`` None) or may set only to
    ``allowed``: what it would widen belongs to the cluster admin."""

    path: tuple[str, ...]  # below spec
    allowed: bool | int | None
    why: str

    @property
    def field(self) -> str:
        return "spec." + ".".join(self.path)


_EVICTOR = ("descheduler", "defaultEvictor")
RESERVED: Final = (
    Reserved(("scope", "namespaceSelector"), None,
             "a CompactionPolicy covers its own namespace only"),
    Reserved(("descheduler", "nodeSelector"), None,
             "the node pool is the cluster admin's (a ClusterCompactionPolicy sets it)"),
    Reserved(("descheduler", "maxDrainingNodes"), 1,
             "draining more than one node at a time is the cluster admin's to allow"),
    Reserved((*_EVICTOR, "evictSystemCriticalPods"), False,
             "evicting system-critical Pods is the cluster admin's to allow"),
    Reserved((*_EVICTOR, "evictLocalStoragePods"), False,
             "evicting Pods with local storage is the cluster admin's to allow"),
    Reserved((*_EVICTOR, "evictDaemonSetPods"), False,
             "evicting DaemonSet Pods is the cluster admin's to allow"),
    Reserved((*_EVICTOR, "ignorePvcPods"), True,
             "evicting Pods with a PersistentVolumeClaim is the cluster admin's to allow"),
)


_ID_BUDGET: Final = 22  # of names.MAX_POLICY_ID (30), what is left beside "." and "-<hash>"


def policy_id(namespace: str, name: str) -> str:
    """A cluster policy's name (lower-case letters, digits and '-', at most 30), or for a
    namespaced one ``<namespace>.<name>``: a dot no cluster policy's name has, so the two
    never collide. Longer than 30 (a label value and the CronJob's name must stay within
    their limits), both parts are shortened and a hash of the whole is appended."""
    if not namespace:
        return name
    whole = f"{namespace}.{name}"
    if len(whole) <= names.MAX_POLICY_ID:
        return whole
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:6]
    ns = namespace[:max(_ID_BUDGET // 2, _ID_BUDGET - len(name))].rstrip("-")
    short = name[:_ID_BUDGET - len(ns)].rstrip("-")
    return f"{ns}.{short}-{digest}"
