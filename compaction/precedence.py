"""The one effective policy per workload, and why it won.

Among enabled policies whose scope matches, in this order:

1. the higher type priority (``compaction.evaluation``: the ``PolicyEvaluation``, else the
   defaults, ``ClusterCompactionPolicy`` 100 over ``CompactionPolicy`` 90);
2. the higher ``spec.weight``;
3. the more specific scope: a label selector beats none; a namespace named exactly (an
   ``In`` list without wildcards, or a namespaced policy's own namespace) beats a pattern,
   which beats ``NotIn`` or no namespace selector; fewer workload types beats more;
4. the older ``creationTimestamp``, between policies of the same kind only;
5. the lexically smaller key ``<Kind>/<name>`` or ``<Kind>/<namespace>/<name>``.

The key is unique, so the order is total and the result cannot depend on the order policies
are listed in. Rule 4 applies only within a kind; since keys begin with the kind, sorting on
(kind, creation, key) after rule 3 is exactly rules 4 and 5.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass

from compaction.evaluation import DEFAULT, Evaluation
from compaction.policy import NamespaceOperator, Policy
from compaction.scope import in_scope, is_ignored
from compaction.static_policy import StaticPolicy
from compaction.workload import Workload

_NEWEST = datetime.datetime.max.replace(tzinfo=datetime.UTC)
Rank = tuple[int, int, int, int, int, str, datetime.datetime, str]


def namespace_specificity(policy: Policy) -> int:
    if policy.namespace:
        return 2  # its own namespace, exactly
    sel = policy.scope.namespace_selector
    if sel is None or sel.operator is NamespaceOperator.NOT_IN:
        return 0
    return 1 if sel.has_wildcards else 2


def rank(policy: Policy, evaluation: Evaluation = DEFAULT) -> Rank:
    """Sort key: the smallest key wins."""
    return (
        -evaluation.priority(policy.kind),
        -policy.weight,
        -int(policy.scope.label_selector is not None),
        -namespace_specificity(policy),
        len(policy.scope.workload_types),
        policy.kind,
        policy.creation_timestamp or _NEWEST,
        policy.key,
    )


def candidates(policies: Iterable[Policy], workload: Workload) -> list[Policy]:
    if is_ignored(workload):
        return []
    return [p for p in policies if p.enabled and in_scope(p, workload)]


def effective_policy(policies: Iterable[Policy], workload: Workload,
                     evaluation: Evaluation = DEFAULT) -> Policy | None:
    return min(candidates(policies, workload), key=lambda p: rank(p, evaluation), default=None)


@dataclass(frozen=True)
class Selection:
    """The winner among a workload's matching policies, the strongest loser, and the rule
    that put one above the other, for a person to read."""

    winner: Policy | None
    runner_up: Policy | None = None
    rule: str = ""

    def summary(self) -> str:
        if self.winner is None:
            return "no compaction policy matches"
        if self.runner_up is None:
            return f"{self.winner.key} is the only matching policy"
        return f"{self.winner.key} won over {self.runner_up.key}: {self.rule}"


def select(policies: Iterable[Policy], workload: Workload,
           evaluation: Evaluation = DEFAULT) -> Selection:
    ranked = sorted(candidates(policies, workload), key=lambda p: rank(p, evaluation))
    if not ranked:
        return Selection(None)
    if len(ranked) == 1:
        return Selection(ranked[0])
    return Selection(ranked[0], ranked[1], decisive_rule(ranked[0], ranked[1], evaluation))


def decisive_rule(winner: Policy, loser: Policy, evaluation: Evaluation = DEFAULT) -> str:
    """Which rule of the order put ``winner`` above ``loser``, with the values compared."""
    wp, lp = evaluation.priority(winner.kind), evaluation.priority(loser.kind)
    if wp != lp:
        return f"type priority {wp} > {lp}"
    if winner.weight != loser.weight:
        return f"weight {winner.weight} > {loser.weight}"
    w_label, l_label = winner.scope.label_selector, loser.scope.label_selector
    if (w_label is None) != (l_label is None):
        return "more specific scope: a label selector"
    if namespace_specificity(winner) != namespace_specificity(loser):
        return "more specific scope: " + (
            "an exact namespace" if namespace_specificity(winner) == 2 else "a namespace pattern")
    if len(winner.scope.workload_types) != len(loser.scope.workload_types):
        return (f"more specific scope: {len(winner.scope.workload_types)} workload types "
                f"< {len(loser.scope.workload_types)}")
    if winner.kind == loser.kind and winner.creation_timestamp != loser.creation_timestamp:
        created = winner.creation_timestamp
        return f"older (created {created.isoformat() if created else 'earlier'})"
    return f"key {winner.key} < {loser.key}"


ResourceRank = tuple[int, int, int, str, datetime.datetime, str]


def resource_rank(policy: StaticPolicy, exact: bool,
                  evaluation: Evaluation = DEFAULT) -> ResourceRank:
    """Sort key of one resource policy's value for one (container, requests|limits,
    resource); the smallest wins: type priority, weight, the exact container name over
    ``*``, the older policy within a kind, the smaller key (sorting on kind first makes rule
    4 apply within a kind only, as for ``rank``)."""
    return (
        -evaluation.priority(policy.kind),
        -policy.weight,
        0 if exact else 1,
        policy.kind,
        policy.creation_timestamp or _NEWEST,
        policy.key,
    )
