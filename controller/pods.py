"""Which workload a Pod belongs to, and the metadata it should carry in place. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compaction import names
from compaction.intent import Intent
from compaction.ownership import MAX_DEPTH, is_intermediate, workload_index
from compaction.safety import is_placeholder, unsafe_to_evict
from controller.metadata import metadata_patch

OwnerKey = tuple[str, str, str]  # kind, namespace, name

# All the controller reads of a Pod (the owner chain, pod_patch, the runtime hook's
# compliance and skip rules); its watch cache keeps nothing else, a few hundred bytes a Pod.
POD_SPEC_FIELDS = ("nodeName", "schedulerName", "priority", "priorityClassName", "volumes")
POD_STATUS_FIELDS = ("phase", "conditions")


def slim_pod(pod: dict[str, Any]) -> dict[str, Any]:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    return {"metadata": _slim_meta(pod),
            "spec": {k: spec[k] for k in POD_SPEC_FIELDS if k in spec},
            "status": {k: status[k] for k in POD_STATUS_FIELDS if k in status}}


def slim_owner(obj: dict[str, Any]) -> dict[str, Any]:
    """ReplicaSets and Jobs are only steps of the owner chain: their metadata is enough."""
    return {"metadata": _slim_meta(obj)}


def _slim_meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}


def _controller(meta: Mapping[str, Any]) -> tuple[str, str] | None:
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("kind", "")), str(ref.get("name", ""))
    return None


@dataclass(frozen=True)
class OwnerIndex:
    """Intermediate owners (ReplicaSets, Jobs) mapped to the owner above them, with the
    annotations each carries (the Deployment controller's copies of its Deployment's)."""

    parents: Mapping[OwnerKey, OwnerKey]
    annotations: Mapping[OwnerKey, Mapping[str, str]]

    @classmethod
    def build(cls, intermediates: Sequence[tuple[str, Mapping[str, Any]]]) -> OwnerIndex:
        parents: dict[OwnerKey, OwnerKey] = {}
        annotations: dict[OwnerKey, Mapping[str, str]] = {}
        for kind, obj in intermediates:
            meta = obj.get("metadata") or {}
            owner = _controller(meta)
            if owner is not None:
                ns = str(meta.get("namespace", ""))
                key = (kind, ns, str(meta.get("name", "")))
                parents[key] = (owner[0], ns, owner[1])
                annotations[key] = meta.get("annotations") or {}
        return cls(parents, annotations)

    def chain(self, pod: Mapping[str, Any]) -> list[OwnerKey]:
        """The Pod's owners, nearest first (e.g. ReplicaSet, then Deployment)."""
        meta = pod.get("metadata") or {}
        owner = _controller(meta)
        if owner is None:
            return []
        ns = str(meta.get("namespace", ""))
        out = [(owner[0], ns, owner[1])]
        while out[-1] in self.parents and len(out) < MAX_DEPTH:
            out.append(self.parents[out[-1]])
        return out

    def workload(self, pod: Mapping[str, Any]) -> tuple[OwnerKey, str] | None:
        """The Pod's workload and the kind of its own owner, by ``compaction.ownership``."""
        chain = self.chain(pod)
        at = workload_index([kind for kind, _, _ in chain])
        return (chain[at], chain[0][0]) if at is not None else None

    def intermediates(self) -> list[tuple[OwnerKey, OwnerKey]]:
        """Every intermediate owner with the workload it leads to, e.g. (ReplicaSet,
        Deployment); a CronJob's Job maps to the CronJob."""
        out = []
        for key, parent in self.parents.items():
            if is_intermediate(key[0], parent[0]):
                out.append((key, parent))
        return out


def stale_copies(intermediate: Mapping[str, str], workload: Mapping[str, str]
                 ) -> list[dict[str, Any]]:
    """A JSONPatch removing our annotations from an intermediate owner where they differ from
    its workload's (a ReplicaSet keeps what its Deployment dropped). Each removal is guarded
    by a ``test`` of the stale value, so a fresh copy written meanwhile is never removed."""
    ops: list[dict[str, Any]] = []
    for key in names.WORKLOAD_ANNOTATIONS:
        value = intermediate.get(key)
        if value is not None and value != workload.get(key):
            at = "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")
            ops += [{"op": "test", "path": at, "value": value}, {"op": "remove", "path": at}]
    return ops


def is_protected(pod: Mapping[str, Any]) -> bool:
    """Pods that must never move though they carry the policy label: safe-to-evict false or
    on-completion (the descheduler does not read that annotation, so the label says it)."""
    return unsafe_to_evict((pod.get("metadata") or {}).get("annotations") or {})


def pod_patch(pod: Mapping[str, Any], intent: Intent | None,
              suppressed: bool) -> dict[str, Any] | None:
    """Merge patch for a Pod's labels and annotations; ``spec.schedulerName`` is immutable.

    Applied under ``setLabelsByEviction`` too: labels and annotations can converge in place,
    so the runtime hook only has to replace Pods for what admission alone can set, the
    scheduler; and Pods that may never be replaced still carry their policy label.
    Placeholders (priority at or below -10) are never patched at all.
    """
    if is_placeholder((pod.get("spec") or {}).get("priority")):
        return None
    meta = pod.get("metadata") or {}
    labels: Mapping[str, str] = meta.get("labels") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    want_labels: dict[str, str | None] = {}
    want_annotations: dict[str, str | None] = {}
    if intent is None:
        for key in (names.POLICY_LABEL, names.WORKLOAD_KIND_LABEL):
            if key in labels:
                want_labels[key] = None
        if names.INTENT_ANNOTATION in annotations:
            want_annotations[names.INTENT_ANNOTATION] = None
    else:
        want_labels.update(intent.labels)
        want_annotations[names.INTENT_ANNOTATION] = intent.render()
    managed = intent is not None
    want_labels[names.SUPPRESSED_LABEL] = "true" if managed and suppressed else None
    want_labels[names.PROTECTED_LABEL] = "true" if managed and is_protected(pod) else None
    return metadata_patch(labels, annotations, want_labels, want_annotations)
