"""Where the drain plan sends each Pod it evicts, fed by a watch of the Pods it marks.

kube-scheduler breaks ties between equal scores at random, and MostAllocated's scores are
integers, so among kept nodes of one shape a replacement may land elsewhere than the plan's
simulation put it; the Pods the plan moves after it then find other room than the plan
counted. The controller marks each Pod it drains with ``compactor.dev/draining`` and the node
the plan sends it to (``compactor.dev/planned-node``). Once a marked Pod is terminating it is
a departure; the next new Pod of the same controller (its ReplicaSet, StatefulSet, ...) that
the compaction scheduler scores takes the oldest departure not yet taken whose planned node it
may go to, as the controller's landing count matches them (oldest first), and the extender
(``webhook.extender``) scores its planned node.

A mark whose Pod leaves the watch before it was seen terminating lost its label (the drain
ended) or was deleted at once: it is dropped. Departures no Pod took are forgotten after
``wait``, as the controller forgets them (its workload was scaled down).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import quote

from compaction import kinds, names

# Pods the controller marks: a small set, whatever the cluster's size.
PATH: Final = (kinds.kind("Pod").path()
               + f"?labelSelector={quote(names.DRAINING_LABEL, safe='')}")
WAIT_SECONDS: Final = 600.0

OwnerKey = tuple[str, str]  # namespace, the controller reference's uid


@dataclass(frozen=True)
class Departure:
    uid: str  # the departed Pod's
    owner: OwnerKey
    planned: str
    left: float


def owner_key(meta: Mapping[str, Any]) -> OwnerKey | None:
    """A Pod's namespace and its controller's uid; None for a Pod no controller replaces."""
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, Mapping) and ref.get("controller") is True and ref.get("uid"):
            return str(meta.get("namespace") or ""), str(ref["uid"])
    return None


@dataclass
class DrainMarks:
    """The marked Pods not yet terminating (counted for the watch's metrics: a departure takes
    its owner and planned node from the event that shows it terminating), the departures, and
    which new Pod took which (a Pod scored twice, after a failed bind say, keeps the
    departure it took)."""

    clock: Callable[[], float] = time.monotonic
    wait: float = WAIT_SECONDS
    synced: bool = False
    served: bool = True
    marked: set[str] = field(default_factory=set)  # their uids
    departed: list[Departure] = field(default_factory=list)  # oldest first
    taken: dict[str, tuple[Departure, float]] = field(default_factory=dict)  # new Pod's uid

    def size(self) -> float:
        return float(len(self.marked))

    def up(self) -> float:
        return 1.0 if self.synced else 0.0

    def is_served(self) -> float:
        return 1.0 if self.served else 0.0

    def clear(self) -> None:
        self.marked = set()

    def replace(self, items: Iterable[Mapping[str, Any]]) -> None:
        """A fresh list: what is marked now; departures already seen stay."""
        self.marked = set()
        for obj in items:
            self.apply("ADDED", obj)

    def apply(self, event_type: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if not uid:
            return
        if event_type == "DELETED":
            self.marked.discard(uid)
            return
        if event_type not in ("ADDED", "MODIFIED"):
            return
        owner = owner_key(meta)
        planned = str((meta.get("annotations") or {}).get(names.PLANNED_NODE_ANNOTATION) or "")
        if owner is None or not planned:
            self.marked.discard(uid)
            return
        if meta.get("deletionTimestamp"):
            self.marked.discard(uid)
            if all(d.uid != uid for d in self.departed) and \
                    all(d.uid != uid for d, _ in self.taken.values()):
                self.departed.append(Departure(uid, owner, planned, self.clock()))
            return
        self.marked.add(uid)

    def planned_node(self, pod_uid: str, owner: OwnerKey | None,
                     candidates: Collection[str]) -> str | None:
        """The node the plan sent the departure ``pod_uid`` replaces; None when it replaces
        none (another reason to create a Pod, or a workload the plan does not drain). Of its
        controller's departures it takes the oldest whose planned node is a candidate: one
        whose replacement the scheduler placed without asking (a single feasible node) left
        its departure behind, and a node gone full since is no destination. When none is, it
        names the oldest's node and takes nothing."""
        now = self.clock()
        self.departed = [d for d in self.departed if now - d.left < self.wait]
        self.taken = {k: v for k, v in self.taken.items() if now - v[1] < self.wait}
        held = self.taken.get(pod_uid)
        if held is not None:
            return held[0].planned
        mine = [d for d in self.departed if d.owner == owner] if owner is not None else []
        for departure in mine:
            if departure.planned in candidates:
                self.departed.remove(departure)
                self.taken[pod_uid] = (departure, now)
                return departure.planned
        return mine[0].planned if mine else None
