"""Why a node stays, told on the Node whenever it changes. Pure.

Each node the plan keeps while Pods of a policy run there gets the Event ``NodeKept`` on the
Node, where ``kubectl describe node`` shows it: the first reason the policies' status gives,
with its code, from the one table (``controller.drain_planner.reasons``). A node nothing
manages is left alone.

What was said is read from the cluster, not remembered: the Node's Events from this controller
(``controller.snapshot.event``), the one written last decides. So a steady pass writes no
Event, and a restarted controller says nothing it has said. A reason said before, and said
again after another, is its Event once more, as client-go's recorder aggregates: one object
per node, reason and message, whose ``count`` and ``lastTimestamp`` move. An Event the API
server has expired (``--event-ttl``, an hour by default) is said anew, so that
``kubectl describe node`` keeps showing why.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Iterable, Sequence
from typing import Final

from controller.drain_planner.drain_plan import DrainPlan
from controller.drain_planner.reasons import Reason
from controller.plan.actions import RecordEvent
from controller.plan.events import MESSAGE_MAX, aggregated, cluster_event
from controller.snapshot.event import NodeEvent
from controller.snapshot.node import NodeInfo

KEPT: Final = "NodeKept"
_NAME_MAX: Final = 253  # an Event's name is a DNS subdomain


def kept(drains: Iterable[DrainPlan]) -> dict[str, Reason]:
    """The nodes the plan keeps while Pods of a policy run there, each with its first reason
    (every policy listed on a node gives the same verdict)."""
    out: dict[str, Reason] = {}
    for d in drains:
        for u in (*d.abandoned, *d.unremovable):
            if u.holds_pods and u.reasons:
                out.setdefault(u.node, u.reasons[0])
    return out


def message(reason: Reason) -> str:
    return f"{reason.text} ({reason.code})"[:MESSAGE_MAX]


def event_name(node: str, uid: str, text: str) -> str:
    """One name per node, reason and message, as client-go keys the Events it aggregates."""
    digest = hashlib.sha256(f"{uid}/{KEPT}/{text}".encode()).hexdigest()[:16]
    return f"{node[:_NAME_MAX - 17].rstrip('.-')}.{digest}"


def notices(nodes: Sequence[NodeInfo], drains: Iterable[DrainPlan],
            told: Iterable[NodeEvent], now: datetime.datetime) -> list[RecordEvent]:
    """The Events of one pass: for each node kept whose reason is not what this controller
    said last about it."""
    wanted = kept(drains)
    if not wanted:
        return []
    uids = {n.name: n.uid for n in nodes}
    said: dict[str, list[NodeEvent]] = {}
    for e in told:
        if e.node in wanted and e.node_uid == uids.get(e.node):
            said.setdefault(e.node, []).append(e)
    out = []
    for node, reason in sorted(wanted.items()):
        text = message(reason)
        history = said.get(node, [])
        last = max(history, key=lambda e: e.written, default=None)
        if last is not None and (last.reason, last.message) == (KEPT, text):
            continue
        uid = uids.get(node, "")
        name = event_name(node, uid, text)
        before = next((e for e in history if e.name == name), None)
        out.append(aggregated(
            cluster_event("Node", node, uid, KEPT, text), name,
            before.count + 1 if before else 1, before.first if before else "", now,
            repeats=before is not None))
    return out

