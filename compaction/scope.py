"""Does a policy's scope cover a workload? Namespace patterns, label selector, kind, opt-out."""

from __future__ import annotations

from collections.abc import Mapping

from compaction import names
from compaction.policy import Policy
from compaction.workload import Workload


def opted_out(labels: Mapping[str, str]) -> bool:
    return labels.get(names.IGNORE_LABEL) == "true"


def is_ignored(workload: Workload) -> bool:
    """The ``compactor.dev/ignore: "true"`` opt-out on namespace, workload or pod template."""
    return (opted_out(workload.namespace_labels) or opted_out(workload.labels)
            or opted_out(workload.template_labels))


def in_scope(policy: Policy, workload: Workload) -> bool:
    """Scope alone: enabled state and opt-out are judged by ``effective_policy``."""
    scope = policy.scope
    if workload.kind not in scope.workload_types:
        return False
    if policy.namespace and policy.namespace != workload.namespace:
        return False  # a CompactionPolicy covers its own namespace only
    if scope.namespace_selector and not scope.namespace_selector.matches(workload.namespace):
        return False
    return not (scope.label_selector and not scope.label_selector.matches(workload.labels))
