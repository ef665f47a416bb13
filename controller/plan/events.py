"""Events the controller records on workloads (core/v1 Event bodies). Pure."""

from __future__ import annotations

from typing import Final, Literal

from compaction import kinds
from controller.plan.actions import RecordEvent
from controller.snapshot.workload import WorkloadInfo

COMPONENT: Final = "compactor-controller"


def workload_event(workload: WorkloadInfo, reason: str, message: str,
                   kind: Literal["Normal", "Warning"] = "Normal") -> RecordEvent:
    view = workload.view
    return RecordEvent(view.namespace, {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": f"{view.name}.", "namespace": view.namespace},
        "involvedObject": {"kind": view.kind.value, "namespace": view.namespace,
                           "name": view.name, "uid": workload.uid,
                           "apiVersion": kinds.kind(view.kind.value).api_version},
        "reason": reason, "message": message, "type": kind,
        "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
    })


# Events about cluster-scoped objects (nodes, cluster policies) live in this namespace, where
# `kubectl describe node` looks for them.
CLUSTER_EVENTS_NAMESPACE: Final = "default"


def cluster_event(kind: str, name: str, uid: str, reason: str, message: str,
                  kind_of_event: Literal["Normal", "Warning"] = "Normal",
                  key: str = "") -> RecordEvent:
    return namespaced_event(kind, "", name, uid, reason, message, kind_of_event, key)


def namespaced_event(kind: str, namespace: str, name: str, uid: str, reason: str,
                     message: str, kind_of_event: Literal["Normal", "Warning"] = "Normal",
                     key: str = "") -> RecordEvent:
    """An Event about any object: in its namespace, or for a cluster-scoped object (empty
    ``namespace``) in ``CLUSTER_EVENTS_NAMESPACE``."""
    involved = {"kind": kind, "name": name, "uid": uid,
                "apiVersion": kinds.kind(kind).api_version}
    if namespace:
        involved["namespace"] = namespace
    where = namespace or CLUSTER_EVENTS_NAMESPACE
    return RecordEvent(where, {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": f"{name}.", "namespace": where},
        "involvedObject": involved,
        "reason": reason, "message": message[:1000], "type": kind_of_event,
        "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
    }, key)
