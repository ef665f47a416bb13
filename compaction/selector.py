"""Kubernetes label selectors (matchLabels + matchExpressions), parsed and matched.

Semantics exactly as ``metav1.LabelSelector``: all requirements are ANDed; ``In`` needs the key
with one of the values; ``NotIn`` matches when the key is absent or has another value;
``Exists``/``DoesNotExist`` look at the key only; an empty selector matches everything.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from compaction.problem import Problem


class Operator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator is Operator.EXISTS:
            return self.key in labels
        if self.operator is Operator.DOES_NOT_EXIST:
            return self.key not in labels
        present = self.key in labels and labels[self.key] in self.values
        return present if self.operator is Operator.IN else not present

    def render(self) -> str:
        """The requirement in the string form ``kubectl -l`` and the descheduler accept."""
        if self.operator is Operator.EXISTS:
            return self.key
        if self.operator is Operator.DOES_NOT_EXIST:
            return f"!{self.key}"
        op = "in" if self.operator is Operator.IN else "notin"
        return f"{self.key} {op} ({','.join(sorted(self.values))})"


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def __bool__(self) -> bool:
        return bool(self.requirements)

    def render(self) -> str:
        return ",".join(r.render() for r in self.requirements)

    def and_(self, other: LabelSelector) -> LabelSelector:
        return LabelSelector(self.requirements + other.requirements)

    def expand_wildcards(self, observed: Mapping[str, Iterable[str]]) -> LabelSelector:
        """Replace ``*`` patterns in In/NotIn values by the matching values seen in the cluster.

        An ``In`` whose values match nothing observed becomes ``key,!key``: it still matches
        nothing rather than silently widening to everything, and it parses where a literal
        pattern would not (the descheduler's label parser rejects ``*`` in a value).
        """
        out: list[Requirement] = []
        for r in self.requirements:
            if r.operator in (Operator.IN, Operator.NOT_IN) and any("*" in v for v in r.values):
                seen = sorted(set(observed.get(r.key, ())))
                values: set[str] = set()
                for v in r.values:
                    values.update(fnmatch.filter(seen, v) if "*" in v else [v])
                if not values and r.operator is Operator.IN:
                    out += [Requirement(r.key, Operator.EXISTS),
                            Requirement(r.key, Operator.DOES_NOT_EXIST)]
                    continue
                if not values:  # NotIn matching nothing observed excludes nothing
                    continue
                out.append(Requirement(r.key, r.operator, tuple(sorted(values))))
            else:
                out.append(r)
        return LabelSelector(tuple(out))


def requirement(key: str, operator: Operator, *values: str) -> Requirement:
    return Requirement(key, operator, tuple(values))


def parse_selector(raw: Any, where: str, problems: list[Problem],
                   allow_wildcards: bool = False) -> LabelSelector:
    """Parse a ``LabelSelector`` object, appending every problem found to ``problems``."""
    if raw is None:
        return LabelSelector()
    if not isinstance(raw, Mapping):
        problems.append(Problem(where, "must be an object with matchLabels/matchExpressions"))
        return LabelSelector()
    reqs: list[Requirement] = []
    unknown = set(raw) - {"matchLabels", "matchExpressions"}
    for key in sorted(unknown):
        problems.append(Problem(f"{where}.{key}", "unknown field"))
    match_labels = raw.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        problems.append(Problem(f"{where}.matchLabels", "must be a map of strings"))
        match_labels = {}
    for k, v in sorted(match_labels.items()):
        if not isinstance(v, str):
            problems.append(Problem(f"{where}.matchLabels.{k}", "value must be a string"))
            continue
        reqs.append(Requirement(str(k), Operator.IN, (v,)))
    exprs = raw.get("matchExpressions") or []
    if not isinstance(exprs, list):
        problems.append(Problem(f"{where}.matchExpressions", "must be a list"))
        exprs = []
    for i, expr in enumerate(exprs):
        at = f"{where}.matchExpressions[{i}]"
        parsed = _parse_expression(expr, at, problems, allow_wildcards)
        if parsed is not None:
            reqs.append(parsed)
    return LabelSelector(tuple(reqs))


def _parse_expression(expr: Any, at: str, problems: list[Problem],
                      allow_wildcards: bool) -> Requirement | None:
    if not isinstance(expr, Mapping):
        problems.append(Problem(at, "must be an object with key, operator and values"))
        return None
    key, op_raw, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    ok = True
    if not isinstance(key, str) or not key:
        problems.append(Problem(f"{at}.key", "is required"))
        ok = False
    try:
        op = Operator(str(op_raw))
    except ValueError:
        allowed = ", ".join(o.value for o in Operator)
        problems.append(Problem(f"{at}.operator", f"must be one of {allowed}, not {op_raw!r}"))
        return None
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        problems.append(Problem(f"{at}.values", "must be a list of strings"))
        return None
    if op in (Operator.IN, Operator.NOT_IN) and not values:
        problems.append(Problem(f"{at}.values", f"must be non-empty for operator {op.value}"))
        ok = False
    if op in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and values:
        problems.append(Problem(f"{at}.values", f"must be empty for operator {op.value}"))
        ok = False
    if not allow_wildcards and any("*" in v for v in values):
        problems.append(Problem(f"{at}.values", "wildcards are not supported here"))
        ok = False
    return Requirement(str(key), op, tuple(values)) if ok else None
