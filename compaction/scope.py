"""Does a policy's scope cover a workload? Namespace patterns, label selector, kind, opt-out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from compaction import names
from compaction.policy import Scope
from compaction.workload import Workload


class Scoped(Protocol):
    """A policy of any kind, as far as its scope goes."""

    @property
    def scope(self) -> Scope: ...

    @property
    def namespace(self) -> str: ...  # a namespaced policy's; it covers that namespace only


def opted_out(labels: Mapping[str, str]) -> bool:
    return labels.get(names.IGNORE_LABEL) == "true"


def is_ignored(workload: Workload) -> bool:
    """The ``compactor.dev/ignore: "true"`` opt-out on namespace, workload or pod template."""
    return (opted_out(workload.namespace_labels) or opted_out(workload.labels)
            or opted_out(workload.template_labels))


def in_scope(policy: Scoped, workload: Workload) -> bool:
    """Scope alone: enabled state and opt-out are judged by ``effective_policy``."""
    scope = policy.scope
    if workload.kind not in scope.workload_types:
        return False
    if policy.namespace and policy.namespace != workload.namespace:
        return False  # a namespaced policy covers its own namespace only
    if scope.namespace_selector and not scope.namespace_selector.matches(workload.namespace):
        return False
    return not (scope.label_selector and not scope.label_selector.matches(workload.labels))
