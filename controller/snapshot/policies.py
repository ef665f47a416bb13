"""Compaction and static policies and the PolicyEvaluation, as stored and as parsed. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from compaction import kinds, names
from compaction.evaluation import Evaluation, parse_evaluation
from compaction.policy import Policy, policy_id
from compaction.problem import InvalidPolicy, Problem
from compaction.static_policy import StaticPolicy, parse_static_policy
from compaction.validation import parse_policy
from controller.snapshot.fields import meta, section


@dataclass(frozen=True)
class PolicyInfo:
    """A policy as stored (kind, namespace, name, generation, the status it shows) and as
    parsed."""

    name: str
    generation: int
    status: Mapping[str, Any]
    policy: Policy | None  # None when it is invalid
    problems: tuple[Problem, ...] = ()
    uid: str = ""
    namespace: str = ""  # a CompactionPolicy's; empty for a ClusterCompactionPolicy
    spec: Mapping[str, Any] = field(default_factory=dict)  # as stored
    # While it is invalid: the last spec it was valid with (kept in its status), parsed.
    last_valid: Policy | None = None

    @property
    def acting(self) -> Policy | None:
        """The policy a pass acts on: its spec, or while that is invalid the last valid one
        (a bad edit must not act like a deletion)."""
        return self.policy or self.last_valid

    @property
    def last_valid_generation(self) -> int:
        value = self.status.get(LAST_VALID_GENERATION)
        return value if isinstance(value, int) else 0

    @property
    def kind(self) -> str:
        return names.NAMESPACED_POLICY_KIND if self.namespace else names.POLICY_KIND

    @property
    def id(self) -> str:
        return policy_id(self.namespace, self.name)

    @property
    def key(self) -> str:
        return Policy(self.name, self.namespace).key

    @property
    def status_path(self) -> str:
        return kinds.kind(self.kind).path(self.namespace or None, self.name, "status")


# Where a policy's status keeps the last spec it was valid with, and that spec's generation.
LAST_VALID_SPEC = "lastValidSpec"
LAST_VALID_GENERATION = "lastValidGeneration"


def parse_policy_info(obj: Mapping[str, Any],
                      protected: frozenset[str] = names.PROTECTED_NAMESPACES) -> PolicyInfo:
    """``protected``: the namespaces no CompactionPolicy may live in
    (``names.protected_namespaces`` of the install namespace)."""
    m, status = meta(obj), section(obj, "status")
    name, generation = str(m.get("name", "")), int(m.get("generation") or 0)
    uid = str(m.get("uid") or "")
    namespace = str(m.get("namespace") or "") if obj.get("kind") == \
        names.NAMESPACED_POLICY_KIND else ""
    spec = section(obj, "spec")
    try:
        return PolicyInfo(name, generation, status, parse_policy(obj, protected), uid=uid,
                          namespace=namespace, spec=spec)
    except InvalidPolicy as e:
        kept = section(status, LAST_VALID_SPEC)
        last_valid = None
        if kept:
            try:
                last_valid = parse_policy({**obj, "spec": kept}, protected)
            except InvalidPolicy:
                pass  # written by a release that accepted more: nothing to fall back on
        return PolicyInfo(name, generation, status, None, tuple(e.problems), uid,
                          namespace, spec, last_valid)


@dataclass(frozen=True)
class StaticPolicyInfo:
    """A resource policy as stored and as parsed."""

    kind: str
    namespace: str
    name: str
    generation: int
    status: Mapping[str, Any]
    policy: StaticPolicy | None  # None when it is invalid
    problems: tuple[Problem, ...] = ()

    @property
    def key(self) -> str:
        return StaticPolicy(self.name, self.namespace).key

    @property
    def status_path(self) -> str:
        return kinds.kind(self.kind).path(self.namespace or None, self.name, "status")


def parse_static_policy_info(obj: Mapping[str, Any],
                             protected: frozenset[str] = names.PROTECTED_NAMESPACES
                             ) -> StaticPolicyInfo:
    m = meta(obj)
    kind = str(obj.get("kind") or names.CLUSTER_STATIC_POLICY_KIND)
    namespace = str(m.get("namespace") or "") if kind == names.STATIC_POLICY_KIND else ""
    name, generation = str(m.get("name", "")), int(m.get("generation") or 0)
    try:
        return StaticPolicyInfo(kind, namespace, name, generation, section(obj, "status"),
                                parse_static_policy(obj, protected))
    except InvalidPolicy as e:
        return StaticPolicyInfo(kind, namespace, name, generation, section(obj, "status"),
                                None, tuple(e.problems))


@dataclass(frozen=True)
class EvaluationInfo:
    """The ``PolicyEvaluation`` singleton as stored and as parsed."""

    evaluation: Evaluation
    problems: tuple[Problem, ...]
    status: Mapping[str, Any]
    uid: str = ""


def parse_evaluation_info(obj: Mapping[str, Any]) -> EvaluationInfo:
    evaluation, problems = parse_evaluation(obj)
    return EvaluationInfo(evaluation, tuple(problems), section(obj, "status"),
                          str(meta(obj).get("uid") or ""))
