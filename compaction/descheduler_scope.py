"""What one policy's descheduler may evict: one rule, read two ways. Pure.

The drain planner judges it on the facts it reads of a Pod (its workload's policy and kind,
suppression, protection, its labels); the rendered descheduler holds it as its evictor's
label selector over the labels the controller writes on every Pod it manages. ``refusal``
and ``selector`` are the same rule, and a property test holds them equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from compaction import names
from compaction.policy import Policy
from compaction.safety import evictable_kinds
from compaction.selector import LabelSelector, Operator, Requirement
from compaction.workload import WorkloadType


class Refusal(StrEnum):
    """Which part of the rule leaves a Pod out; ``refusal`` names the first, in this order."""

    OTHER_POLICY = "other_policy"
    KIND = "kind"
    SUPPRESSED = "suppressed"
    EVICTOR_SELECTOR = "evictor_selector"
    PROTECTED = "protected"


@dataclass(frozen=True)
class PodFacts:
    """What the controller knows of a Pod, and writes on it as labels."""

    policy: str | None  # its workload's effective policy
    kind: WorkloadType | None  # its workload's kind
    suppressed: bool
    protected: bool  # safe-to-evict false, do-not-disrupt, or a toleration of the drain taint


@dataclass(frozen=True)
class DeschedulerScope:
    policy: str
    kinds: frozenset[WorkloadType]
    evictor: LabelSelector  # the policy's own descheduler.defaultEvictor.labelSelector

    @classmethod
    def of(cls, policy: Policy) -> DeschedulerScope:
        ev = policy.descheduler.default_evictor
        return cls(policy.id, evictable_kinds(ev.evict_daemon_set_pods), ev.label_selector)

    def refusal(self, pod: PodFacts, labels: Mapping[str, str]) -> Refusal | None:
        """Why this policy's descheduler would leave the Pod alone; None when it may evict
        it. ``labels``: the Pod's own labels (the evictor's selector reads them)."""
        if pod.policy != self.policy:
            return Refusal.OTHER_POLICY
        if pod.kind is None or pod.kind not in self.kinds:
            return Refusal.KIND
        if pod.suppressed:
            return Refusal.SUPPRESSED
        if self.evictor.requirements and not self.evictor.matches(labels):
            return Refusal.EVICTOR_SELECTOR
        if pod.protected:
            return Refusal.PROTECTED
        return None

    def selector(self, *also: Requirement) -> LabelSelector:
        """The rule as a label selector over the labels the controller writes on the Pods it
        manages (its policy, its workload's kind, suppressed, protected) and the Pod's own;
        ``also``: requirements the caller adds before the evictor's."""
        return LabelSelector((
            Requirement(names.POLICY_LABEL, Operator.IN, (self.policy,)),
            Requirement(names.WORKLOAD_KIND_LABEL, Operator.IN,
                        tuple(sorted(k.value for k in self.kinds))),
            Requirement(names.SUPPRESSED_LABEL, Operator.DOES_NOT_EXIST),
            Requirement(names.PROTECTED_LABEL, Operator.DOES_NOT_EXIST),
            *also,
        )).and_(self.evictor)

