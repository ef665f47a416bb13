"""Which workload a Pod belongs to, and the metadata it should carry in place. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from compaction import names
from compaction.intent import Intent
from compaction.ownership import MAX_DEPTH, is_intermediate, workload_index
from compaction.safety import do_not_disrupt, is_placeholder, unsafe_to_evict
from controller.drain_planner.taint import tolerates_drain
from controller.plan.metadata_patch import metadata_patch
from controller.snapshot.owner import OwnerInfo, OwnerKey
from controller.snapshot.pod import PodInfo


@dataclass(frozen=True)
class OwnerIndex:
    """Intermediate owners (ReplicaSets, Jobs) mapped to the owner above them, with the
    annotations each carries (the Deployment controller's copies of its Deployment's)."""

    parents: Mapping[OwnerKey, OwnerKey]
    annotations: Mapping[OwnerKey, Mapping[str, str]]

    @classmethod
    def build(cls, intermediates: Iterable[OwnerInfo]) -> OwnerIndex:
        parents: dict[OwnerKey, OwnerKey] = {}
        annotations: dict[OwnerKey, Mapping[str, str]] = {}
        for owner in intermediates:
            if owner.controller is not None:
                parents[owner.key] = (owner.controller[0], owner.namespace, owner.controller[1])
                annotations[owner.key] = owner.annotations
        return cls(parents, annotations)

    def chain(self, pod: PodInfo) -> list[OwnerKey]:
        """The Pod's owners, nearest first (e.g. ReplicaSet, then Deployment)."""
        if pod.owner is None:
            return []
        out = [(pod.owner[0], pod.namespace, pod.owner[1])]
        while out[-1] in self.parents and len(out) < MAX_DEPTH:
            out.append(self.parents[out[-1]])
        return out

    def workload(self, pod: PodInfo) -> OwnerKey | None:
        """The Pod's workload, by ``compaction.ownership``."""
        chain = self.chain(pod)
        at = workload_index([kind for kind, _, _ in chain])
        return chain[at] if at is not None else None

    def intermediates(self) -> list[tuple[OwnerKey, OwnerKey]]:
        """Every intermediate owner with the owner above it, e.g. (ReplicaSet, Deployment);
        a CronJob's Job maps to the CronJob."""
        return [(key, parent) for key, parent in self.parents.items()
                if is_intermediate(key[0], parent[0])]


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


def is_protected(pod: PodInfo) -> bool:
    """Pods that must never move though they carry the policy label: safe-to-evict false or
    on-completion, or Karpenter's do-not-disrupt (the descheduler reads neither annotation,
    so the label says it), and
    Pods that tolerate the drain taint (the taint plugin never evicts them, so no other
    plugin of the profile may either: their node is never drained)."""
    return unsafe_to_evict(pod.annotations) or do_not_disrupt(pod.annotations) or \
        tolerates_drain(pod.constraints.tolerations)


def pod_patch(pod: PodInfo, intent: Intent | None, suppressed: bool,
              draining: str | None = None, planned_node: str | None = None
              ) -> dict[str, Any] | None:
    """Merge patch for a Pod's labels and annotations; ``spec.schedulerName`` is immutable.

    Applied under ``setLabelsByEviction`` too: labels and annotations can converge in place,
    so the runtime hook only has to replace Pods for what admission alone can set, the
    scheduler; and Pods that may never be replaced still carry their policy label.
    ``draining`` names the policy whose plan drains the Pod's node: its descheduler may
    evict only Pods so labelled; ``planned_node``, where the plan sends it. Placeholders (priority
    at or below -10) are never patched.
    """
    if is_placeholder(pod.priority):
        return None
    want_labels: dict[str, str | None] = {}
    want_annotations: dict[str, str | None] = {}
    if intent is None:
        for key in (names.POLICY_LABEL, names.WORKLOAD_KIND_LABEL):
            if key in pod.labels:
                want_labels[key] = None
        if names.INTENT_ANNOTATION in pod.annotations:
            want_annotations[names.INTENT_ANNOTATION] = None
    else:
        want_labels.update(intent.labels)
        want_annotations[names.INTENT_ANNOTATION] = intent.render()
    managed = intent is not None
    want_labels[names.SUPPRESSED_LABEL] = "true" if managed and suppressed else None
    want_labels[names.PROTECTED_LABEL] = "true" if managed and is_protected(pod) else None
    want_labels[names.DRAINING_LABEL] = draining if managed else None
    want_annotations[names.PLANNED_NODE_ANNOTATION] = (
        planned_node if managed and draining else None)
    return metadata_patch(pod.labels, pod.annotations, want_labels, want_annotations)
