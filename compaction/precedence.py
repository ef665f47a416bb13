"""The one effective policy per workload.

Among enabled policies whose scope matches: higher ``spec.weight``; then the more specific
scope (a label selector beats none; an ``In`` namespace list without wildcards beats one with
wildcards, which beats ``NotIn`` or no namespace selector; fewer workload types beats more);
then the older ``creationTimestamp``; then the lexically smaller name. The name is unique,
so the order is total and the result cannot depend on the order policies are listed in.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable

from compaction.policy import NamespaceOperator, Policy
from compaction.scope import in_scope, is_ignored
from compaction.workload import Workload

_NEWEST = datetime.datetime.max.replace(tzinfo=datetime.UTC)


def namespace_specificity(policy: Policy) -> int:
    sel = policy.scope.namespace_selector
    if sel is None or sel.operator is NamespaceOperator.NOT_IN:
        return 0
    return 1 if sel.has_wildcards else 2


def rank(policy: Policy) -> tuple[int, int, int, int, datetime.datetime, str]:
    """Sort key: the smallest key wins."""
    return (
        -policy.weight,
        -int(policy.scope.label_selector is not None),
        -namespace_specificity(policy),
        len(policy.scope.workload_types),
        policy.creation_timestamp or _NEWEST,
        policy.name,
    )


def effective_policy(policies: Iterable[Policy], workload: Workload) -> Policy | None:
    if is_ignored(workload):
        return None
    candidates = [p for p in policies if p.enabled and in_scope(p, workload)]
    return min(candidates, key=rank, default=None)
