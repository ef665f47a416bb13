"""Why a node stays: one table of reason codes, read by the planner, the policies' status, the
metrics and the preview. Pure.

A reason's ``code`` names it in metrics and status; its ``text`` says it of one node, for a
person; ``CAUSES`` says it of a group of nodes. A Pod that never moves keeps the code of its
``compaction.safety.Hold``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from compaction import names
from compaction.safety import Hold


class Code(StrEnum):
    PROTECTED_NAMESPACE = Hold.PROTECTED_NAMESPACE.value
    MIRROR = Hold.MIRROR.value
    PLACEHOLDER = Hold.PLACEHOLDER.value
    BARE_POD = Hold.BARE_POD.value
    KIND_NOT_EVICTED = Hold.KIND_NOT_EVICTED.value
    SAFE_TO_EVICT = Hold.SAFE_TO_EVICT.value
    DO_NOT_DISRUPT = Hold.DO_NOT_DISRUPT.value
    SYSTEM_CRITICAL = Hold.SYSTEM_CRITICAL.value
    LOCAL_STORAGE = Hold.LOCAL_STORAGE.value
    PVC = Hold.PVC.value
    SUPPRESSED = "suppressed"
    PDB = "pdb"
    MULTIPLE_PDBS = "multiple_pdbs"
    EVICTOR_SELECTOR = "evictor_selector"
    TOLERATES_DRAIN = "tolerates_drain"
    NO_EVICTIONS = "no_evictions"
    NOT_SIMULATED = "not_simulated"
    NO_POLICY = "no_policy"
    NOT_READY = "not_ready"
    LEAVING = "leaving"
    OUTSIDE_POOL = "outside_pool"
    ABOVE_THRESHOLDS = "above_thresholds"
    NUMBER_OF_NODES = "number_of_nodes"
    EVICTION_COST = "eviction_cost"
    EVICTION_BUDGET = "eviction_budget"
    RECENTLY_REPLACED = "recently_replaced"
    DESTINATION = "destination"
    DOES_NOT_FIT = "does_not_fit"
    UNCERTAIN_DESTINATION = "uncertain_destination"
    ATTRACTED = "attracted"
    TIMED_OUT = "timed_out"
    LEFT_POOL = "left_pool"
    DESCHEDULER_DISABLED = "descheduler_disabled"
    DRAINED = "drained"
    NO_POOL = "no_pool"


# What each code means for a group of nodes (a reason's own text names one Pod or node).
CAUSES: Final[Mapping[Code, str]] = {
    # Compactor's own namespace is the one it runs in (compaction.names.protected_namespaces).
    Code.PROTECTED_NAMESPACE: "pod in a protected namespace (kube-system or Compactor's own)",
    Code.MIRROR: "mirror Pod",
    Code.PLACEHOLDER: f"placeholder Pod (priority {names.PLACEHOLDER_PRIORITY} or lower)",
    Code.BARE_POD: "pod without a controller",
    Code.KIND_NOT_EVICTED: "pod of a kind never evicted",
    Code.SAFE_TO_EVICT: "pod annotated safe-to-evict=false",
    Code.DO_NOT_DISRUPT: "pod annotated karpenter.sh/do-not-disrupt",
    Code.SYSTEM_CRITICAL: "system-critical pod",
    Code.LOCAL_STORAGE: "pod with local storage",
    Code.PVC: "pod with a PersistentVolumeClaim",
    Code.SUPPRESSED: "pod of a suppressed workload",
    Code.PDB: "PodDisruptionBudget allowing 0 disruptions",
    Code.MULTIPLE_PDBS: "pod under more than one PodDisruptionBudget (never evictable)",
    Code.EVICTOR_SELECTOR: "pod outside the policy's evictor label selector",
    Code.TOLERATES_DRAIN: "pod tolerating the drain taint",
    Code.NO_EVICTIONS: "policy whose descheduler may evict 0 Pods",
    Code.NOT_SIMULATED: "pod the simulation does not judge",
    Code.NO_POLICY: "pod of no compaction policy",
    Code.NOT_READY: "node not ready or cordoned",
    Code.LEAVING: "node being removed by an autoscaler",
    Code.OUTSIDE_POOL: "node outside the policy's node pool",
    Code.ABOVE_THRESHOLDS: "node above the policy's utilization thresholds",
    Code.NUMBER_OF_NODES: "too few underutilized nodes for numberOfNodes",
    Code.EVICTION_COST: "node whose freeing costs more evictions than maxEvictionsToFreeNode",
    Code.EVICTION_BUDGET: "pod whose workload's eviction budget allows no more evictions now "
                          "(or is invalid)",
    Code.RECENTLY_REPLACED: "pod that replaced one Compactor evicted less than "
                            "evictReplacementsAfter ago",
    Code.DESTINATION: "node taking Pods of the nodes freed first",
    Code.DOES_NOT_FIT: "pod that fits on no other node",
    Code.ATTRACTED: "pod the scheduler would put on a node the plan counts as free",
    Code.UNCERTAIN_DESTINATION: "pod whose scheduler the plan cannot read, with a choice of nodes",
    Code.TIMED_OUT: "drain that did not finish in time",
    Code.LEFT_POOL: "node that left the pool",
    Code.DESCHEDULER_DISABLED: "policy whose descheduler is disabled",
    Code.DRAINED: "node already drained (what is left never moves)",
    Code.NO_POOL: "node in no policy's node pool",
}


@dataclass(frozen=True)
class Reason:
    """Why a node cannot be freed: ``code`` for metrics, ``text`` for a person."""

    code: Code
    text: str
