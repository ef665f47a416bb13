"""The drain taint itself: how the planner marks a node it empties, and how a pass finds
the mark. Pure.

``compactor.dev/drain=<policy>:PreferNoSchedule``: the compaction scheduler avoids the node,
and every policy with Pods to move there evicts its own share through its descheduler's
``RemovePodsViolatingNodeTaints`` (which matches the key, whatever the value). The value
names the policy the drain was started for, the first by id of those with Pods to move;
``timeAdded`` is when it started, which bounds how long a drain may take.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

from compaction import names
from controller.snapshot.constraints import Effect, Taint, Toleration
from controller.snapshot.fields import format_time
from controller.snapshot.node import NodeInfo


def drain_taint(policy: str, since: datetime.datetime) -> Taint:
    return Taint(names.DRAIN_TAINT, policy, Effect.PREFER_NO_SCHEDULE, format_time(since))


def drain_owner(node: NodeInfo) -> Taint | None:
    """Our drain taint on the node, if any (its value names the policy it was started for)."""
    return next((t for t in node.taints if t.key == names.DRAIN_TAINT), None)


def tolerates_drain(tolerations: Iterable[Toleration]) -> bool:
    """Whether these tolerations tolerate a drain taint of any value: such a Pod is never
    evicted by ``RemovePodsViolatingNodeTaints``, so its node can never be drained."""
    return any(t.effect in ("", Effect.PREFER_NO_SCHEDULE)
               and (t.key == names.DRAIN_TAINT or (not t.key and t.operator == "Exists"))
               for t in tolerations)


def taint_patch(node: NodeInfo, wanted: Taint | None) -> list[dict[str, Any]]:
    """A JSON patch that sets our drain taint (or removes it) and touches no other taint; it
    applies only if the node's taints are still those read."""
    kept = [t.render() for t in node.taints if t.key != names.DRAIN_TAINT]
    taints = kept + ([wanted.render()] if wanted else [])
    if node.taints:
        return [{"op": "test", "path": "/spec/taints", "value": [t.render() for t in node.taints]},
                {"op": "replace", "path": "/spec/taints", "value": taints}]
    return [{"op": "test", "path": "/metadata/resourceVersion", "value": node.resource_version},
            {"op": "add", "path": "/spec/taints", "value": taints}]
