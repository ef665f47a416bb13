"""Which workload a Pod belongs to, and the metadata it should carry in place. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compaction import names
from compaction.intent import Intent
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
    """Intermediate owners (ReplicaSets, Jobs) mapped to the workload above them."""

    parents: Mapping[OwnerKey, OwnerKey]

    @classmethod
    def build(cls, intermediates: Sequence[tuple[str, Mapping[str, Any]]]) -> OwnerIndex:
        parents: dict[OwnerKey, OwnerKey] = {}
        for kind, obj in intermediates:
            meta = obj.get("metadata") or {}
            owner = _controller(meta)
            if owner is not None:
                ns = str(meta.get("namespace", ""))
                parents[(kind, ns, str(meta.get("name", "")))] = (owner[0], ns, owner[1])
        return cls(parents)

    def chain(self, pod: Mapping[str, Any]) -> list[OwnerKey]:
        """The Pod's owners, nearest first (e.g. ReplicaSet, then Deployment)."""
        meta = pod.get("metadata") or {}
        owner = _controller(meta)
        if owner is None:
            return []
        ns = str(meta.get("namespace", ""))
        out = [(owner[0], ns, owner[1])]
        while out[-1] in self.parents and len(out) < 4:
            out.append(self.parents[out[-1]])
        return out


def is_protected(pod: Mapping[str, Any]) -> bool:
    """Pods that must never move: safe-to-evict false/on-completion, placeholder headroom."""
    meta = pod.get("metadata") or {}
    if (meta.get("annotations") or {}).get(names.SAFE_TO_EVICT_ANNOTATION) in (
            "false", "on-completion"):
        return True
    priority = (pod.get("spec") or {}).get("priority")
    return isinstance(priority, int) and priority < names.PLACEHOLDER_PRIORITY_CUTOFF


def pod_patch(pod: Mapping[str, Any], intent: Intent | None,
              suppressed: bool) -> dict[str, Any] | None:
    """Merge patch for a Pod's labels and annotations; ``spec.schedulerName`` is immutable.

    Applied under ``setLabelsByEviction`` too: labels and annotations can converge in place,
    so the runtime hook only has to replace Pods for what admission alone can set, the
    scheduler; and Pods that may never be replaced still carry their policy label.
    """
    meta = pod.get("metadata") or {}
    labels: Mapping[str, str] = meta.get("labels") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    want_labels: dict[str, str | None] = {}
    want_annotations: dict[str, str | None] = {}
    if intent is None:
        if names.POLICY_LABEL in labels:
            want_labels[names.POLICY_LABEL] = None
        if names.INTENT_ANNOTATION in annotations:
            want_annotations[names.INTENT_ANNOTATION] = None
    else:
        want_labels.update(intent.labels)
        want_annotations[names.INTENT_ANNOTATION] = intent.render()
    managed = intent is not None
    want_labels[names.SUPPRESSED_LABEL] = "true" if managed and suppressed else None
    want_labels[names.PROTECTED_LABEL] = "true" if managed and is_protected(pod) else None
    return metadata_patch(labels, annotations, want_labels, want_annotations)
