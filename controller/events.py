"""Events the controller records on workloads (core/v1 Event bodies). Pure."""

from __future__ import annotations

from typing import Final, Literal

from compaction import kinds
from controller.actions import RecordEvent
from controller.workloads import WorkloadObject

COMPONENT: Final = "compactor-controller"


def workload_event(workload: WorkloadObject, reason: str, message: str,
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
