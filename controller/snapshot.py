"""What one pass knows of the cluster, read in full before anything is decided. Pure.

The reader (``controller.reader``) fills a ``Snapshot`` from the API server and the watch
caches; ``controller.plan`` decides from it alone. Objects arrive here as the API's dicts and
leave as frozen records holding only what the decisions read, so no decision pokes into a
dict and a watch cache of them stays small.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from compaction.policy import Policy
from compaction.problem import InvalidPolicy, Problem
from compaction.validation import parse_policy
from controller.objects import controller_of, meta, parse_time, revision, section, str_map
from controller.workloads import WorkloadObject

OwnerKey = tuple[str, str, str]  # kind, namespace, name


@dataclass(frozen=True, slots=True)
class PodInfo:
    """A Pod as the controller reads it: identity, metadata, placement, state."""

    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    owner: tuple[str, str] | None = None  # controller owner: kind, name
    node_name: str = ""
    scheduler_name: str = "default-scheduler"
    priority: int | None = None
    priority_class_name: str = ""
    phase: str = ""
    ready: bool = False
    deleting: bool = False
    created: datetime.datetime | None = None
    local_storage: bool = False  # an emptyDir or hostPath volume
    pvc: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name


def parse_pod(obj: Mapping[str, Any]) -> PodInfo:
    m, spec, status = meta(obj), section(obj, "spec"), section(obj, "status")
    volumes = [v for v in spec.get("volumes") or [] if isinstance(v, Mapping)]
    priority = spec.get("priority")
    phase = str(status.get("phase") or "")
    return PodInfo(
        namespace=str(m.get("namespace") or ""), name=str(m.get("name") or ""),
        uid=str(m.get("uid") or ""),
        labels=str_map(m.get("labels")), annotations=str_map(m.get("annotations")),
        owner=controller_of(m),
        node_name=str(spec.get("nodeName") or ""),
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool)
        else None,
        priority_class_name=str(spec.get("priorityClassName") or ""),
        phase=phase,
        ready=phase == "Running" and any(
            isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []),
        deleting=bool(m.get("deletionTimestamp")),
        created=parse_time(m.get("creationTimestamp")),
        local_storage=any("emptyDir" in v or "hostPath" in v for v in volumes),
        pvc=any("persistentVolumeClaim" in v for v in volumes),
    )


@dataclass(frozen=True, slots=True)
class OwnerInfo:
    """An intermediate owner (ReplicaSet, Job): only a step of a Pod's owner chain."""

    kind: str
    namespace: str
    name: str
    controller: tuple[str, str] | None
    annotations: Mapping[str, str]

    @property
    def key(self) -> OwnerKey:
        return self.kind, self.namespace, self.name


def owner_parser(kind: str) -> Callable[[Mapping[str, Any]], OwnerInfo]:
    def parse(obj: Mapping[str, Any]) -> OwnerInfo:
        m = meta(obj)
        return OwnerInfo(kind, str(m.get("namespace") or ""), str(m.get("name") or ""),
                         controller_of(m), str_map(m.get("annotations")))
    return parse


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


def parse_node(obj: Mapping[str, Any]) -> NodeInfo:
    m = meta(obj)
    return NodeInfo(str(m.get("name") or ""), str_map(m.get("labels")))


@dataclass(frozen=True)
class PolicyObject:
    """A policy as stored (name, generation, the status it shows) and as parsed."""

    name: str
    generation: int
    status: Mapping[str, Any]
    policy: Policy | None  # None when it is invalid
    problems: tuple[Problem, ...] = ()


def parse_policy_object(obj: Mapping[str, Any]) -> PolicyObject:
    m = meta(obj)
    name, generation = str(m.get("name", "")), int(m.get("generation") or 0)
    try:
        return PolicyObject(name, generation, section(obj, "status"), parse_policy(obj))
    except InvalidPolicy as e:
        return PolicyObject(name, generation, section(obj, "status"), None, tuple(e.problems))


@dataclass(frozen=True)
class OwnObject:
    """An object the controller created in its namespace, as the API server holds it now."""

    kind: str
    name: str
    labels: Mapping[str, str]
    revision: str  # controller.objects.revision: changes when its desired state changes
    available_replicas: int = 0

    @property
    def policy(self) -> str | None:
        return self.labels.get("compactor.dev/policy")


def parse_own(kind: str, obj: Mapping[str, Any]) -> OwnObject:
    m = meta(obj)
    return OwnObject(kind, str(m.get("name") or ""), str_map(m.get("labels")),
                     revision(kind, obj),
                     int(section(obj, "status").get("availableReplicas") or 0))


@dataclass(frozen=True)
class Snapshot:
    policies: tuple[PolicyObject, ...] = ()
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    nodes: tuple[NodeInfo, ...] = ()
    workloads: tuple[WorkloadObject, ...] = ()
    owners: tuple[OwnerInfo, ...] = ()  # ReplicaSets and Jobs
    pods: tuple[PodInfo, ...] = ()
    own: tuple[OwnObject, ...] = ()
    cluster_version: str = ""
