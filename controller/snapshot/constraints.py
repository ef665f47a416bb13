"""A Pod's scheduling constraints as kube-scheduler reads them, for the planner's simulation. Pure.

Taints and tolerations, ``nodeSelector`` and required node affinity, required Pod
anti-affinity on the hostname. Constraints the simulation cannot judge (inter-Pod affinity,
anti-affinity on another topology key, hard topology spread) are kept as such, so that the
planner treats their Pods as unmovable rather than guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from compaction.selector import LabelSelector, parse_selector

HOSTNAME: Final = "kubernetes.io/hostname"


class Effect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str
    time_added: str = ""  # as the API holds it (RFC 3339), kept so it can be written back

    def render(self) -> dict[str, str]:
        """The taint as the API serializes it (empty fields left out)."""
        out = {"key": self.key, "effect": self.effect}
        if self.value:
            out["value"] = self.value
        if self.time_added:
            out["timeAdded"] = self.time_added
        return out


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal or Exists
    value: str = ""
    effect: str = ""  # empty: every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


def tolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration],
              effects: frozenset[str] = frozenset({Effect.NO_SCHEDULE, Effect.NO_EXECUTE})
              ) -> Taint | None:
    """The first taint of ``effects`` that no toleration tolerates, or None."""
    for taint in taints:
        if taint.effect in effects and not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


@dataclass(frozen=True, slots=True)
class NodeRequirement:
    """One ``matchExpressions`` entry of a node selector term (labels or fields)."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()
    field: bool = False  # matchFields: the key is metadata.name

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        value = name if self.field else labels.get(self.key)
        if self.operator == "Exists":
            return value is not None
        if self.operator == "DoesNotExist":
            return value is None
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator in ("Gt", "Lt") and value is not None and self.values:
            try:
                left, right = int(value), int(self.values[0])
            except ValueError:
                return False
            return left > right if self.operator == "Gt" else left < right
        return False


@dataclass(frozen=True, slots=True)
class AntiAffinity:
    """A required Pod anti-affinity term on the hostname: no Pod it selects on the node."""

    selector: LabelSelector
    namespaces: tuple[str, ...]  # empty: the Pod's own namespace

    def selects(self, own_namespace: str, namespace: str, labels: Mapping[str, str]) -> bool:
        allowed = self.namespaces or (own_namespace,)
        return namespace in allowed and self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class Constraints:
    """Where a Pod may go, as its spec says."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    # Required node affinity: the node must match one term (every requirement of it).
    terms: tuple[tuple[NodeRequirement, ...], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    anti_affinity: tuple[AntiAffinity, ...] = ()
    # Why the simulation cannot judge this Pod, if it cannot (empty: it can).
    unsimulated: str = ""

    @property
    def tolerations_only(self) -> bool:
        """Nothing but tolerations (every Pod has the API server's default ones for
        not-ready and unreachable nodes): the Pod may go wherever a Pod without constraints
        may, and onto tainted nodes it tolerates, so it ranks nodes as such a Pod does."""
        return not (self.node_selector or self.terms or self.anti_affinity or self.unsimulated)

    def admits(self, name: str, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        return not self.terms or any(all(r.matches(name, labels) for r in term)
                                     for term in self.terms)


# The one record of a Pod that constrains nothing: most Pods share it, and the planner
# places them by identity without checking.
UNCONSTRAINED: Final = Constraints()


def _requirements(raw: Any, field_keys: bool) -> tuple[NodeRequirement, ...]:
    out = []
    for expr in raw or []:
        if isinstance(expr, Mapping):
            out.append(NodeRequirement(str(expr.get("key", "")), str(expr.get("operator", "")),
                                       tuple(str(v) for v in expr.get("values") or []),
                                       field_keys))
    return tuple(out)


def _preferences(node: Any, pod_affinity: Any, pod_anti: Any, spec: Mapping[str, Any]) -> str:
    """The first preference of the Pod's that the compaction scheduler's profile scores."""
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    for what, rules in (("preferred node affinity", node), ("preferred pod affinity", pod_affinity),
                        ("preferred pod anti-affinity", pod_anti)):
        if isinstance(rules, Mapping) and rules.get(preferred):
            return what
    for constraint in spec.get("topologySpreadConstraints") or []:
        if isinstance(constraint, Mapping) and constraint.get(
                "whenUnsatisfiable") == "ScheduleAnyway":
            return f"topology spread on {constraint.get('topologyKey')} (ScheduleAnyway)"
    return ""


def parse_constraints(spec: Mapping[str, Any]) -> Constraints:
    affinity = spec.get("affinity") if isinstance(spec.get("affinity"), Mapping) else {}
    assert isinstance(affinity, Mapping)
    node = affinity.get("nodeAffinity") or {}
    required = (node.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
                if isinstance(node, Mapping) else {})
    terms = tuple(
        _requirements(t.get("matchExpressions"), False) + _requirements(t.get("matchFields"), True)
        for t in (required.get("nodeSelectorTerms") or []) if isinstance(t, Mapping))
    tolerations = tuple(
        Toleration(str(t.get("key") or ""), str(t.get("operator") or "Equal"),
                   str(t.get("value") or ""), str(t.get("effect") or ""))
        for t in spec.get("tolerations") or [] if isinstance(t, Mapping))
    unsimulated, anti = "", []
    pod_affinity = affinity.get("podAffinity") or {}
    if isinstance(pod_affinity, Mapping) and pod_affinity.get(
            "requiredDuringSchedulingIgnoredDuringExecution"):
        unsimulated = "required pod affinity"
    pod_anti = affinity.get("podAntiAffinity") or {}
    for term in (pod_anti.get("requiredDuringSchedulingIgnoredDuringExecution") or []
                 if isinstance(pod_anti, Mapping) else []):
        if not isinstance(term, Mapping):
            continue
        if term.get("topologyKey") != HOSTNAME or term.get("namespaceSelector") is not None:
            unsimulated = f"required pod anti-affinity on {term.get('topologyKey')}"
            continue
        anti.append(AntiAffinity(parse_selector(term.get("labelSelector"), "", []),
                                 tuple(str(n) for n in term.get("namespaces") or [])))
    for constraint in spec.get("topologySpreadConstraints") or []:
        if isinstance(constraint, Mapping) and constraint.get(
                "whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule":
            unsimulated = f"topology spread on {constraint.get('topologyKey')} (DoNotSchedule)"
    # Preferences only weigh in the score, yet each can outweigh MostAllocated: the simulation
    # does not guess where they would send the Pod.
    if not unsimulated:
        unsimulated = _preferences(node, pod_affinity, pod_anti, spec)
    selector = spec.get("nodeSelector")
    constraints = Constraints(
        {str(k): str(v) for k, v in selector.items()} if isinstance(selector, Mapping) else {},
        terms, tolerations, tuple(anti), unsimulated)
    return UNCONSTRAINED if constraints == UNCONSTRAINED else constraints

