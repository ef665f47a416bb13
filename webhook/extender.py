"""The compaction scheduler's extender, ``POST /prioritize`` (``webhook.extender_server``): it
scores the node the drain plan sent a Pod's departed predecessor to, so that the scheduler's
choice among nodes of equal score is the plan's (``webhook.drain_marks``).

kube-scheduler sends ``ExtenderArgs`` (``Pod``, and ``NodeNames`` with ``nodeCacheCapable``, else
``Nodes``) and takes a ``HostPriorityList`` of scores from 0 to 10, multiplied by the
extender's weight and by 10 (``MaxNodeScore / MaxExtenderPriority``). The rendered weight
(``controller.components.scheduler``) puts the planned node ahead of every node with the same
PreferNoSchedule taints, never ahead of one with fewer: the drain taint still decides first.
The extender is ``ignorable``: an error, or no answer within its timeout, leaves the
scheduler's own scores, so no Pod waits on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from webhook.drain_marks import DrainMarks, owner_key
from webhook.errors import MalformedExtenderArgs

MAX_PRIORITY: Final = 10  # extenderv1.MaxExtenderPriority


def _candidates(args: Mapping[str, Any]) -> list[str]:
    names = args.get("NodeNames")
    if isinstance(names, list):
        return [str(n) for n in names]
    nodes = args.get("Nodes")
    items = nodes.get("items") if isinstance(nodes, Mapping) else None
    if isinstance(items, list):
        metas = [n.get("metadata") for n in items if isinstance(n, Mapping)]
        return [str(m.get("name") or "") for m in metas if isinstance(m, Mapping)]
    raise MalformedExtenderArgs("ExtenderArgs with neither NodeNames nor Nodes")


def prioritize(body: bytes, marks: DrainMarks) -> tuple[bytes, str]:
    """The HostPriorityList for ``body``, and what it did: ``planned`` (the planned node is a
    candidate and scores the most), ``elsewhere`` (it is not a candidate: full, or gone) or
    ``none`` (the Pod replaces no departure)."""
    try:
        args = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise MalformedExtenderArgs(f"ExtenderArgs is not JSON: {e}") from e
    if not isinstance(args, Mapping) or not isinstance(args.get("Pod"), Mapping):
        raise MalformedExtenderArgs("ExtenderArgs without a Pod")
    meta = args["Pod"].get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise MalformedExtenderArgs("ExtenderArgs with a Pod without metadata")
    candidates = _candidates(args)
    planned = marks.planned_node(str(meta.get("uid") or ""), owner_key(meta), candidates)
    outcome = ("none" if planned is None
               else "planned" if planned in candidates else "elsewhere")
    return orjson.dumps([{"Host": n, "Score": MAX_PRIORITY if n == planned else 0}
                         for n in candidates]), outcome
