"""The policy, intent and metadata each workload should carry. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from compaction import kinds, names
from compaction.evaluation import Evaluation
from compaction.intent import Intent, intent_for
from compaction.policy import Policy
from compaction.precedence import effective_policy, select
from compaction.resource_plan import Composition
from compaction.workload import WorkloadType
from controller.plan import resources
from controller.plan.actions import (
    Action,
    Patch,
    Target,
)
from controller.plan.draft import Draft
from controller.plan.events import workload_event
from controller.plan.metadata_patch import metadata_patch
from controller.plan.pod_metadata import OwnerIndex, stale_copies
from controller.snapshot.workload import WorkloadInfo, WorkloadKey


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


def label_workloads(workloads: Iterable[WorkloadInfo], active: list[Policy],
                    evaluation: Evaluation, composed: Mapping[WorkloadKey, Composition],
                    up: bool, out: Draft) -> dict[WorkloadKey, tuple[WorkloadInfo, Policy | None]]:
    decided: dict[WorkloadKey, tuple[WorkloadInfo, Policy | None]] = {}
    for w in workloads:
        selection = select(active, w.view, evaluation)
        policy = selection.winner
        decided[w.key] = (w, policy)
        if policy is not None:
            out.managed[policy.id] += 1
        patch = workload_patch(w, intent_of(policy, w.view.kind, up),
                               resources.planned(composed.get(w.key)))
        if patch is None:
            continue
        before, after = w.labels.get(names.POLICY_LABEL), policy.id if policy else None
        event: tuple[Action, ...] = ()
        if before != after:
            message = (f"no compaction policy applies any more (was {before!r})"
                       if policy is None else
                       selection.summary() + (f" (was {before!r})" if before else ""))
            event = (workload_event(w, "CompactionPolicyChanged", message),)
            out.selections.append(f"{w.view.kind.value} {w.view.namespace}/{w.view.name}: "
                                  f"{message}")
        out.actions.append(Patch(w.path, patch, Target.WORKLOAD, then=event))
    return decided


def _wanted_annotations(w: WorkloadInfo, policy: Policy | None,
                        plan: str | None, up: bool) -> dict[str, str]:
    """The workload's annotations once this pass has patched it."""
    wanted = dict(w.annotations)
    intent = intent_of(policy, w.view.kind, up)
    for key, value in ((names.INTENT_ANNOTATION, intent.render() if intent else None),
                       (names.RESOURCES_ANNOTATION, plan)):
        if value is None:
            wanted.pop(key, None)
        else:
            wanted[key] = value
    return wanted


def clean_stale_copies(index: OwnerIndex,
                       decided: Mapping[WorkloadKey, tuple[WorkloadInfo, Policy | None]],
                       composed: Mapping[WorkloadKey, Composition], up: bool, out: Draft) -> None:
    """Our annotations on ReplicaSets (and a CronJob's Jobs) that their workload no longer
    carries are removed, so that ``kubectl`` shows the truth there too."""
    for key, parent in index.intermediates():
        if parent not in decided:
            continue
        ops = stale_copies(index.annotations.get(key, {}), _wanted_annotations(
            *decided[parent], resources.planned(composed.get(parent)), up))
        if ops:
            out.actions.append(Patch(kinds.kind(key[0]).path(key[1], key[2]), ops,
                                     Target.STALE_COPY, "json", frozenset({404, 422})))
