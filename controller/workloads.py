"""Workloads as the controller sees them, and the metadata each one should carry. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from compaction import names
from compaction.intent import Intent, intent_for
from compaction.policy import Policy
from compaction.precedence import effective_policy
from compaction.workload import API_VERSIONS, Workload, WorkloadType
from controller.metadata import metadata_patch

PLURALS: Final[Mapping[WorkloadType, str]] = {
    WorkloadType.DEPLOYMENT: "deployments", WorkloadType.STATEFUL_SET: "statefulsets",
    WorkloadType.DAEMON_SET: "daemonsets", WorkloadType.CRON_JOB: "cronjobs",
    WorkloadType.JOB: "jobs", WorkloadType.ROLLOUT: "rollouts",
    WorkloadType.ANALYSIS_RUN: "analysisruns", WorkloadType.STRIMZI_POD_SET: "strimzipodsets",
    WorkloadType.MODEL: "models",
}


def list_path(kind: WorkloadType) -> str:
    gv = API_VERSIONS[kind]
    base = "/api/v1" if gv == "v1" else f"/apis/{gv}"
    return f"{base}/{PLURALS[kind]}"


def object_path(kind: WorkloadType, namespace: str, name: str) -> str:
    gv = API_VERSIONS[kind]
    base = "/api/v1" if gv == "v1" else f"/apis/{gv}"
    return f"{base}/namespaces/{namespace}/{PLURALS[kind]}/{name}"


def _template_labels(kind: WorkloadType, obj: Mapping[str, Any]) -> Mapping[str, str]:
    spec = obj.get("spec") or {}
    if kind is WorkloadType.CRON_JOB:
        spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
    template = spec.get("template") or {}
    return (template.get("metadata") or {}).get("labels") or {}


@dataclass(frozen=True)
class WorkloadObject:
    """One workload: the matching view plus what the controller needs to patch it."""

    view: Workload
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    owned: bool  # has a controller owner of a supported kind (e.g. a Job of a CronJob)
    replicas: int = 1  # Pods it wants running now


    @property
    def key(self) -> tuple[str, str, str]:
        return (self.view.kind.value, self.view.namespace, self.view.name)

    @property
    def path(self) -> str:
        return object_path(self.view.kind, self.view.namespace, self.view.name)

    @property
    def suppressed(self) -> bool:
        return self.labels.get(names.SUPPRESSED_LABEL) == "true"


def workload_object(kind: WorkloadType, obj: Mapping[str, Any],
                    namespace_labels: Mapping[str, str]) -> WorkloadObject:
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    owners = [r for r in meta.get("ownerReferences") or [] if r.get("controller")]
    return WorkloadObject(
        view=Workload(kind=kind, namespace=str(meta.get("namespace", "")),
                      name=str(meta.get("name", "")), labels=labels,
                      template_labels=_template_labels(kind, obj),
                      namespace_labels=namespace_labels),
        uid=str(meta.get("uid", "")),
        labels=labels,
        annotations=meta.get("annotations") or {},
        owned=any(r.get("kind") in ("CronJob", "Rollout") for r in owners),
        replicas=_desired_replicas(kind, obj),
    )


def _desired_replicas(kind: WorkloadType, obj: Mapping[str, Any]) -> int:
    if kind is WorkloadType.DAEMON_SET:
        return int((obj.get("status") or {}).get("desiredNumberScheduled") or 0)
    replicas = (obj.get("spec") or {}).get("replicas")
    return int(replicas) if isinstance(replicas, int) else 1


def desired_policy(policies: Iterable[Policy], workload: WorkloadObject) -> Policy | None:
    # A Job of a CronJob (or an AnalysisRun of a Rollout) follows its owner's intent through
    # the webhook's fallback; labelling it separately could contradict the owner.
    if workload.owned:
        return None
    return effective_policy(policies, workload.view)


def workload_patch(workload: WorkloadObject, intent: Intent | None) -> dict[str, Any] | None:
    """The merge patch that converges the workload's *metadata* (never its pod template)."""
    if intent is None:
        want_labels: dict[str, str | None] = {names.POLICY_LABEL: None}
        want_annotations: dict[str, str | None] = {names.INTENT_ANNOTATION: None}
    else:
        want_labels = dict(intent.labels)
        want_annotations = {names.INTENT_ANNOTATION: intent.render()}
    return metadata_patch(workload.labels, workload.annotations, want_labels, want_annotations)


def intent_of(policy: Policy | None) -> Intent | None:
    return intent_for(policy) if policy is not None else None
