"""What the controller watches and caches, and the record each object becomes.

Every read of a pass has a ``Source``: the bulk (Pods, ReplicaSets, Jobs), the workloads of
every kind, namespaces, nodes, disruption budgets, LimitRanges, policies of every kind, the
PolicyEvaluation, the controller's own objects in its namespace and its own Events about
cluster-scoped objects (what it has told on Nodes). A pass then costs the API server no
request at all; what it costs per minute is the watches and the lease, whatever the cluster's
size.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, Final

from compaction import kinds, names
from compaction.limit_range import parse_limit_range
from compaction.workload import WorkloadType
from controller.kubeapi.informer import Source
from controller.snapshot.event import CLUSTER_EVENTS_NAMESPACE, parse_node_event
from controller.snapshot.fields import Obj, meta, str_map
from controller.snapshot.node import NodeInfo, parse_node
from controller.snapshot.owned import parse_owned
from controller.snapshot.owner import OwnerInfo, owner_parser
from controller.snapshot.pdb import parse_pdb
from controller.snapshot.pod import parse_pod
from controller.snapshot.pod_schema import decode_pod_list
from controller.snapshot.policies import (
    EvaluationInfo,
    parse_evaluation_info,
    parse_policy_info,
    parse_static_policy_info,
)
from controller.snapshot.workload import WorkloadInfo, list_path, parse_workload

POLICIES: Final = tuple(kinds.kind(k).path() for k in names.POLICY_KINDS)
STATIC_POLICIES: Final = tuple(kinds.kind(k).path() for k in names.STATIC_POLICY_KINDS)
LIMIT_RANGES: Final = kinds.kind("LimitRange").path()
EVALUATIONS: Final = kinds.kind(names.EVALUATION_KIND).path()
PODS, REPLICA_SETS, JOBS = (kinds.kind(k).path() for k in ("Pod", "ReplicaSet", "Job"))
NAMESPACES, NODES, PDBS = (kinds.kind(k).path()
                           for k in ("Namespace", "Node", "PodDisruptionBudget"))
OWN_KINDS: Final = ("ConfigMap", "CronJob", "Deployment")
OWN_SELECTOR: Final = f"{names.MANAGED_BY_LABEL}={names.MANAGED_BY_VALUE}"
NODE_EVENTS: Final = kinds.kind("Event").path(CLUSTER_EVENTS_NAMESPACE)

_parse_job_owner = owner_parser("Job")


def parse_job(obj: Obj) -> tuple[OwnerInfo, WorkloadInfo | None]:
    """A Job is a step of a CronJob's chain and may be a workload of its own."""
    return _parse_job_owner(obj), parse_workload(WorkloadType.JOB, obj, {})


def parse_named_evaluation(obj: Obj) -> tuple[str, EvaluationInfo]:
    """Only the singleton's name counts; the name is kept beside the record."""
    return str(meta(obj).get("name") or ""), parse_evaluation_info(obj)


def parse_namespace(obj: Obj) -> tuple[str, Mapping[str, str]]:
    return str(meta(obj).get("name") or ""), str_map(meta(obj).get("labels"))


def _workload_parser(kind: WorkloadType) -> Any:
    def parse(obj: Obj) -> WorkloadInfo | None:
        return parse_workload(kind, obj, {})  # the namespace's labels are added per pass
    return parse


def _same_node(a: NodeInfo, b: NodeInfo) -> bool:
    """Equal but for the resourceVersion: a status heartbeat, nothing a pass decides on."""
    return dataclasses.replace(a, resource_version="") == dataclasses.replace(
        b, resource_version="")


def own_path(kind: str, namespace: str) -> str:
    return kinds.kind(kind).path(namespace)


def sources(namespace: str) -> dict[str, Source]:
    """Every path a pass reads, keyed by its list path. A change wakes the reconciler except
    for the bulk kinds (a workload's status change says its Pods changed), the disruption
    budgets and the controller's own objects and Events (read again at the next resync)."""
    protected = names.protected_namespaces(namespace)
    out = {
        PODS: Source(parse_pod, decode=decode_pod_list, wakes=False),
        REPLICA_SETS: Source(owner_parser("ReplicaSet"), wakes=False),
        NAMESPACES: Source(parse_namespace, same=lambda a, b: bool(a == b)),
        NODES: Source(parse_node, same=_same_node),
        PDBS: Source(parse_pdb, wakes=False),
        EVALUATIONS: Source(parse_named_evaluation),
        # A policy in a protected namespace (Compactor's own among them) is invalid.
        **{p: Source(functools.partial(parse_policy_info, protected=protected))
           for p in POLICIES},
        **{p: Source(functools.partial(parse_static_policy_info, protected=protected))
           for p in STATIC_POLICIES},
        LIMIT_RANGES: Source(parse_limit_range),
        **{list_path(k): Source(_workload_parser(k)) for k in WorkloadType
           if k is not WorkloadType.JOB},
        JOBS: Source(parse_job),
        NODE_EVENTS: Source(parse_node_event, wakes=False, selector=OWN_SELECTOR),
    }
    for kind in OWN_KINDS:
        out[own_path(kind, namespace)] = Source(
            _own_parser(kind), wakes=False, selector=OWN_SELECTOR)
    return out


def _own_parser(kind: str) -> Any:
    def parse(obj: Obj) -> Any:
        return parse_owned(kind, obj)
    return parse
