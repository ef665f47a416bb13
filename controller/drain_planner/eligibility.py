"""Whether a Pod may leave its node under its own policy, and if not, the reason that keeps the
node. Pure.

Whatever the policy's rendered descheduler config would not evict blocks: the rule of
``compaction.safety``, suppression, a budget at zero, the evictor's label selector, a
toleration of the drain taint."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from compaction import names
from compaction.descheduler_scope import DeschedulerScope, PodFacts, Refusal
from compaction.policy import Policy
from compaction.safety import Hold, eviction_hold
from compaction.selector import LabelSelector
from compaction.workload import WorkloadType
from controller.drain_planner.drain_plan import Member
from controller.drain_planner.reasons import Code, Reason
from controller.snapshot.pdb import PdbInfo, eviction_refused
from controller.snapshot.pod import PodInfo


@dataclass(frozen=True)
class Scope:
    """One policy as the plan reads it: its pool, matched once per pass."""

    policy: Policy
    rule: DeschedulerScope  # what its descheduler may evict
    pool: LabelSelector
    nodes: frozenset[str]
    # Whether more of the pool's possible sources are underutilized than numberOfNodes asks
    # for, and how many are.
    gate: tuple[bool, int]
    evicts: bool  # whether its descheduler may evict any Pod in a run


_HOLD_TEXT: Final = {
    Hold.PROTECTED_NAMESPACE: "is in {ns}", Hold.MIRROR: "is a mirror Pod",
    Hold.PLACEHOLDER: "is a placeholder",
    Hold.BARE_POD: "has no controller (a bare Pod is never recreated)",
    Hold.KIND_NOT_EVICTED: "belongs to a {kind} (its Pods are not evicted)",
    Hold.SAFE_TO_EVICT: "safe-to-evict={safe}",
    Hold.DO_NOT_DISRUPT: "is annotated karpenter.sh/do-not-disrupt",
    Hold.SYSTEM_CRITICAL: "is system-critical",
    Hold.LOCAL_STORAGE: "uses local storage", Hold.PVC: "has a PersistentVolumeClaim"}


def _hold_reason(pod: PodInfo, hold: Hold, kind: WorkloadType | None) -> Reason:
    text = _HOLD_TEXT[hold].format(
        ns=pod.namespace, kind=kind.value if kind else "workload",
        safe=pod.annotations.get(names.SAFE_TO_EVICT_ANNOTATION, ""))
    return Reason(Code(hold.value), f"pod {pod.namespace}/{pod.name} {text}")


# A refusal the holds did not already name (a Pod of another policy or kind has one).
_REFUSED: Final = {
    Refusal.OTHER_POLICY: (Code.NO_POLICY, "belongs to another policy"),
    Refusal.KIND: (Code.KIND_NOT_EVICTED, "belongs to a workload whose Pods are not evicted"),
    Refusal.SUPPRESSED: (Code.SUPPRESSED, "belongs to a suppressed workload"),
    Refusal.EVICTOR_SELECTOR: (
        Code.EVICTOR_SELECTOR, "is outside the policy's descheduler.defaultEvictor.labelSelector"),
    Refusal.PROTECTED: (Code.TOLERATES_DRAIN, "tolerates the drain taint"),
}


def blocker(pod: PodInfo, member: Member, scope: Scope, pdbs: Sequence[PdbInfo],
            tolerates: bool, protected: frozenset[str] = names.PROTECTED_NAMESPACES
            ) -> Reason | None:
    """Why this Pod of the scope's policy keeps its node; None when the policy's descheduler
    can evict it. Whatever the rendered descheduler config would not evict blocks.
    ``tolerates``: whether the Pod tolerates the drain taint. Run for every Pod: the text of
    a reason is built only once there is one."""
    d = scope.policy.descheduler
    hold = eviction_hold(pod, member.kind, d.default_evictor, protected)
    if hold is not None:
        return _hold_reason(pod, hold, member.kind)
    # The holds above are protection's other half: here only a toleration protects.
    refusal = scope.rule.refusal(
        PodFacts(member.policy, member.kind, member.suppressed, tolerates), pod.labels)
    if refusal is Refusal.SUPPRESSED:
        code, text = _REFUSED[refusal]
        return Reason(code, f"{who(pod)} {text}")
    refused = eviction_refused(pod, pdbs) if pdbs else None
    if isinstance(refused, tuple):
        return Reason(Code.MULTIPLE_PDBS, f"{who(pod)} is matched by PodDisruptionBudgets "
                      f"{', '.join(f'{p.namespace}/{p.name}' for p in refused)}: the Eviction "
                      "API refuses a Pod under more than one")
    if refused is not None:
        return Reason(Code.PDB,
                      f"PodDisruptionBudget {refused.namespace}/{refused.name} allows 0 "
                      "disruptions")
    if refusal is not None:
        code, text = _REFUSED[refusal]
        return Reason(code, f"{who(pod)} {text}")
    if not scope.evicts:
        return Reason(Code.NO_EVICTIONS, f"{who(pod)}: the policy's descheduler may evict 0 "
                      "Pods per run")
    if pod.constraints.unsimulated:
        return Reason(Code.NOT_SIMULATED,
                      f"{who(pod)}: {pod.constraints.unsimulated} is not simulated")
    return None


def who(pod: PodInfo) -> str:
    return f"pod {pod.namespace}/{pod.name}"
