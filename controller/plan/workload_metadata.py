"""The policy, intent and metadata each workload should carry. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from compaction import names
from compaction.intent import Intent, intent_for
from compaction.policy import Policy
from compaction.precedence import effective_policy
from compaction.workload import WorkloadType
from controller.plan.metadata_patch import metadata_patch
from controller.snapshot.workload import WorkloadInfo


def desired_policy(policies: Iterable[Policy], workload: WorkloadInfo) -> Policy | None:
    return effective_policy(policies, workload.view)


def workload_patch(workload: WorkloadInfo, intent: Intent | None,
                   resources: str | None = None) -> dict[str, Any] | None:
    """The merge patch that converges the workload's *metadata* (never its pod template): the
    policy label, the intent (its other labels are for its Pods) and the resource plan."""
    if intent is None:
        want_labels: dict[str, str | None] = {names.POLICY_LABEL: None}
        want_annotations: dict[str, str | None] = {names.INTENT_ANNOTATION: None}
    else:
        want_labels = {names.POLICY_LABEL: intent.policy}
        want_annotations = {names.INTENT_ANNOTATION: intent.render()}
    want_annotations[names.RESOURCES_ANNOTATION] = resources
    return metadata_patch(workload.labels, workload.annotations, want_labels, want_annotations)


def intent_of(policy: Policy | None, kind: WorkloadType, managed_scheduler_up: bool = True
              ) -> Intent | None:
    return intent_for(policy, kind, managed_scheduler_up) if policy is not None else None
