"""Why a node is no candidate at all, whatever its Pods. Pure.

A node is tried only while it is ready, schedulable and staying, in the pool of every policy
judging it, at or below each one's thresholds with its ``numberOfNodes`` gate open, and while
what freeing it costs, the evictions of every policy's Pods there (placeholders move without
one), is within each one's ``maxEvictionsToFreeNode``. The texts name the rule that holds,
not the node's use of the moment: a reason stays the same while the node stays for it.
"""

from __future__ import annotations

from collections.abc import Sequence

from compaction.utilization import is_underutilized
from controller.drain_planner.eligibility import Scope
from controller.drain_planner.reasons import Code, Reason
from controller.drain_planner.sim_node import SimNode, leaving, utilization


def gates(node: SimNode, governing: Sequence[Scope], cost: int) -> list[Reason]:
    """Every reason ``node``, whose freeing costs ``cost`` evictions, is no candidate."""
    info = node.info
    reasons = []
    if not info.ready or info.unschedulable:
        reasons.append(Reason(Code.NOT_READY, "node is not ready or is cordoned"))
    if leaving(info):
        reasons.append(Reason(Code.LEAVING, "node is being removed by an autoscaler"))
    u = utilization(node)
    for scope in governing:
        prefix = _prefix(scope, governing)
        hnu = scope.policy.descheduler.high_node_utilization
        if info.name not in scope.nodes:
            reasons.append(Reason(Code.OUTSIDE_POOL,
                                  f"{prefix}node is outside the policy's node pool"))
        elif not is_underutilized(u, hnu.thresholds):
            t = hnu.thresholds
            over = [f"{limit:g}% {what}" for what, used, limit in (
                ("CPU", u.cpu, t.cpu), ("memory", u.memory, t.memory), ("Pods", u.pods, t.pods))
                if used > limit]
            reasons.append(Reason(Code.ABOVE_THRESHOLDS, (
                f"{prefix}above the {', '.join(over[:-1])}{' and ' if len(over) > 1 else ''}"
                f"{over[-1]} threshold{'s' if len(over) > 1 else ''}")))
        elif not scope.gate[0]:
            reasons.append(Reason(Code.NUMBER_OF_NODES, (
                f"{prefix}only {scope.gate[1]} underutilized nodes; numberOfNodes is "
                f"{hnu.number_of_nodes}")))
    return reasons + over_limit(cost, governing)


def over_limit(cost: int, governing: Sequence[Scope]) -> list[Reason]:
    """Why a node that costs ``cost`` evictions is no candidate: one reason per policy
    judging it whose ``maxEvictionsToFreeNode`` it exceeds (none when unset)."""
    reasons = []
    for scope in governing:
        limit = scope.policy.descheduler.max_evictions_to_free_node
        if limit is not None and cost > limit:
            reasons.append(Reason(Code.EVICTION_COST, (
                f"{_prefix(scope, governing)}freeing the node costs {cost} "
                f"eviction{'s' if cost != 1 else ''}, above maxEvictionsToFreeNode {limit}")))
    return reasons


def _prefix(scope: Scope, governing: Sequence[Scope]) -> str:
    return f"policy {scope.policy.id}: " if len(governing) > 1 else ""
