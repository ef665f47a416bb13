"""The drain taints' life, decided from the pass's drain plans. Pure.

A node the plan drains carries the drain taint (``controller.drain_planner.taint``) until the drain
is done, the plan no longer holds, or no policy with Pods there drains any more; a drain
under way keeps the taint it started with, so its ``timeAdded`` still bounds it. The node
and each policy taking part hear of every step as an Event.
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Literal

from compaction import kinds, names
from compaction.policy import Policy
from controller.drain_planner.drain_plan import DrainPlan
from controller.drain_planner.taint import drain_owner, drain_taint, taint_patch
from controller.plan.actions import Action, Patch, Target
from controller.plan.events import cluster_event, namespaced_event
from controller.snapshot.node import NodeInfo


def taint_actions(nodes: Iterable[NodeInfo], drains: Iterable[DrainPlan],
                  policies: Mapping[str, Policy], now: datetime.datetime) -> list[Action]:
    """The taint patches and Events of one pass. ``policies``: the active ones, by id. (Why
    a node stays is told by ``controller.plan.node_notices``.)"""
    nodes = list(nodes)
    uids = {n.name: n.uid for n in nodes}
    actions: list[Action] = []
    takers: dict[str, list[Policy]] = defaultdict(list)  # draining node -> its policies
    events: dict[str, list[Action]] = defaultdict(list)
    for d in drains:
        policy = policies[d.policy]
        if not policy.descheduler.enabled:
            continue
        for name in d.draining:
            takers[name].append(policy)
        for name in d.drained:
            events[name] += _node_and_policy(policy, name, uids, "NodeDrained",
                                             "every Pod to move has left the node")
        for u in d.abandoned:
            events[u.node] += _node_and_policy(policy, u.node, uids, "NodeNotConsolidatable",
                                               f"drain stopped: {u.reasons[0].text}", "Warning")
    for node in nodes:
        current = drain_owner(node)
        taking = sorted(takers.get(node.name, ()), key=lambda p: p.id)
        if bool(current) == bool(taking):
            continue
        wanted = drain_taint(taking[0].id, now) if taking else None
        for policy in taking:
            events[node.name] += _node_and_policy(
                policy, node.name, uids, "NodeDrainPlanned",
                f"tainted {names.DRAIN_TAINT}={taking[0].id}:PreferNoSchedule; the "
                "descheduler of each policy with Pods here evicts its own, and they fit on "
                "the other nodes")
        actions.append(Patch(kinds.kind("Node").path(name=node.name),
                             taint_patch(node, wanted), Target.NODE, "json",
                             frozenset({404, 422}), tuple(events.pop(node.name, []))))
    for queued in events.values():
        actions += queued
    return actions


def _node_and_policy(policy: Policy, node: str, uids: Mapping[str, str], reason: str,
                     message: str, kind: Literal["Normal", "Warning"] = "Normal"
                     ) -> list[Action]:
    return [cluster_event("Node", node, uids.get(node, ""), reason,
                          f"policy {policy.key}: {message}", kind),
            namespaced_event(policy.kind, policy.namespace, policy.name, policy.uid, reason,
                             f"node {node}: {message}", kind)]
