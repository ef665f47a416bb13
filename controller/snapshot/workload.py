"""Workloads as the controller sees them: the record and its parser. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from compaction import kinds, names
from compaction.ownership import is_workload
from compaction.resource_plan import TemplateContainer
from compaction.workload import Workload, WorkloadType
from controller.snapshot.fields import controller_of
from controller.snapshot.fields import meta as meta_of


def list_path(kind: WorkloadType) -> str:
    return kinds.kind(kind.value).path()


def _template(kind: WorkloadType, obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec") or {}
    if kind is WorkloadType.CRON_JOB:
        spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
    template = spec.get("template")
    return template if isinstance(template, Mapping) else {}


def _template_labels(kind: WorkloadType, obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (_template(kind, obj).get("metadata") or {}).get("labels") or {}


def _quantities(raw: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}


def template_containers(kind: WorkloadType, obj: Mapping[str, Any], field: str = "containers"
                        ) -> tuple[TemplateContainer, ...]:
    """The pod template's containers (``field="initContainers"``: its init containers) and
    their resources. A kind without a standard pod template (a KubeAI Model) has none:
    nothing to resize there."""
    out = []
    for c in (_template(kind, obj).get("spec") or {}).get(field) or []:
        if isinstance(c, Mapping) and isinstance(c.get("name"), str):
            res = c.get("resources") if isinstance(c.get("resources"), Mapping) else {}
            assert isinstance(res, Mapping)
            out.append(TemplateContainer(c["name"], _quantities(res.get("requests")),
                                         _quantities(res.get("limits")),
                                         c.get("restartPolicy") == "Always"))
    return tuple(out)


WorkloadKey = tuple[str, str, str]  # kind, namespace, name


@dataclass(frozen=True)
class WorkloadInfo:
    """One workload: the matching view plus what the controller needs to patch it."""

    view: Workload
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    replicas: int = 1  # Pods it wants running now
    containers: tuple[TemplateContainer, ...] = ()  # of its pod template, for resource plans
    # Never resized, but they count in the Pod's totals a LimitRange judges.
    init_containers: tuple[TemplateContainer, ...] = ()

    @property
    def key(self) -> WorkloadKey:
        return (self.view.kind.value, self.view.namespace, self.view.name)

    @property
    def path(self) -> str:
        return kinds.kind(self.view.kind.value).path(self.view.namespace, self.view.name)

    @property
    def suppressed(self) -> bool:
        return self.labels.get(names.SUPPRESSED_LABEL) == "true"


def parse_workload(kind: WorkloadType, obj: Mapping[str, Any],
                   namespace_labels: Mapping[str, str]) -> WorkloadInfo | None:
    """The workload, or None for an object of a workload kind that is only a step of another
    workload's chain (a CronJob's Job): its Pods belong to the workload above it."""
    owner = controller_of(meta_of(obj))
    if not is_workload(kind.value, owner[0] if owner else None):
        return None
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    return WorkloadInfo(
        view=Workload(kind=kind, namespace=str(meta.get("namespace", "")),
                      name=str(meta.get("name", "")), labels=labels,
                      template_labels=_template_labels(kind, obj),
                      namespace_labels=namespace_labels),
        uid=str(meta.get("uid", "")),
        labels=labels,
        annotations=meta.get("annotations") or {},
        replicas=_desired_replicas(kind, obj),
        containers=template_containers(kind, obj),
        init_containers=template_containers(kind, obj, "initContainers"),
    )


def _desired_replicas(kind: WorkloadType, obj: Mapping[str, Any]) -> int:
    if kind is WorkloadType.DAEMON_SET:
        return int((obj.get("status") or {}).get("desiredNumberScheduled") or 0)
    replicas = (obj.get("spec") or {}).get("replicas")
    return int(replicas) if isinstance(replicas, int) else 1
