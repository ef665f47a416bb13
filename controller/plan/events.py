"""Events the controller records (core/v1 Event bodies). Pure.

Each carries the label ``app.kubernetes.io/managed-by=compactor``: a pass reads its Node Events
back to know what it has said (``controller.snapshot.event``), and a person lists them all with
``kubectl get events -A -l app.kubernetes.io/managed-by=compactor``.
"""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Final, Literal

from compaction import kinds, names
from controller.plan.actions import RecordEvent
from controller.snapshot.event import CLUSTER_EVENTS_NAMESPACE
from controller.snapshot.fields import format_time
from controller.snapshot.workload import WorkloadInfo

COMPONENT: Final = "compactor-controller"
_LABELS: Final = {names.MANAGED_BY_LABEL: names.MANAGED_BY_VALUE}
MESSAGE_MAX: Final = 1000


def workload_event(workload: WorkloadInfo, reason: str, message: str,
                   kind: Literal["Normal", "Warning"] = "Normal") -> RecordEvent:
    view = workload.view
    return RecordEvent(view.namespace, {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": f"{view.name}.", "namespace": view.namespace,
                     "labels": dict(_LABELS)},
        "involvedObject": {"kind": view.kind.value, "namespace": view.namespace,
                           "name": view.name, "uid": workload.uid,
                           "apiVersion": kinds.kind(view.kind.value).api_version},
        "reason": reason, "message": message, "type": kind,
        "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
    })


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
        "metadata": {"generateName": f"{name}.", "namespace": where, "labels": dict(_LABELS)},
        "involvedObject": involved,
        "reason": reason, "message": message[:MESSAGE_MAX], "type": kind_of_event,
        "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
    }, key)


def aggregated(event: RecordEvent, name: str, count: int, first: str,
               now: datetime.datetime, repeats: bool) -> RecordEvent:
    """``event`` as client-go's recorder keeps one: an object of its own ``name``, whose
    ``count`` and ``lastTimestamp`` move each time the same thing is said again (``repeats``:
    it was said before, under that name) instead of a new object each time. ``first``: when
    it was first said (empty: now)."""
    stamp = format_time(now)
    return replace(event, body={
        **event.body, "metadata": {"name": name, "namespace": event.namespace,
                                   "labels": dict(_LABELS)},
        "count": count, "firstTimestamp": first or stamp, "lastTimestamp": stamp},
        repeats=name if repeats else "")
