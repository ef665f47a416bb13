"""The last drain plans, reused while nothing they read has changed. Pure.

Passes that carry a policy change onto thousands of Pods come every few seconds, and a plan
of 500 nodes costs a second each time; the labels and intent Compactor itself writes on Pods
change on every one of them, and nothing the plan decides depends on those.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from compaction import names
from compaction.policy import Policy
from compaction.selector import LabelSelector
from controller.drains import DRAIN_TIMEOUT, DrainPlan, Member, plan_drains
from controller.scheduling import UNCONSTRAINED
from controller.snapshot import NodeInfo, PdbInfo, PodInfo

# A plan is reused for at most this long while its inputs stay the same (time alone matters
# only for a drain's timeout, of hours).
REUSE: Final = datetime.timedelta(minutes=5)
# The labels Compactor itself writes on Pods; a plan never reads them, unless a budget or an
# anti-affinity term selects on one.
_OWN_POD_LABELS: Final = frozenset({
    names.POLICY_LABEL, names.WORKLOAD_KIND_LABEL, names.PROTECTED_LABEL,
    names.SUPPRESSED_LABEL, names.DRAINING_LABEL})


@dataclass(frozen=True)
class DrainMemo:
    """The last plans and a digest of what they were computed from."""

    key: int
    at: datetime.datetime
    plans: tuple[DrainPlan, ...]


def _selects_own(selector: LabelSelector | None) -> bool:
    return selector is not None and any(r.key in _OWN_POD_LABELS for r in selector.requirements)


# What the plan reads of a Pod's annotations: nothing else there changes a plan.
_READ_ANNOTATIONS: Final = (names.SAFE_TO_EVICT_ANNOTATION, names.MIRROR_ANNOTATION)
# Fields left out of a node's digest: the resourceVersion moves with every status heartbeat.
_NODE_UNREAD: Final = frozenset({"resource_version"})
_POD_FIELDS: Final = tuple(f.name for f in dataclasses.fields(PodInfo))
_NODE_FIELDS: Final = tuple(f.name for f in dataclasses.fields(NodeInfo)
                            if f.name not in _NODE_UNREAD)


def _frozen(value: object) -> object:
    return tuple(value.items()) if isinstance(value, Mapping) else value


def inputs_key(policies: Sequence[tuple[Policy, LabelSelector]], nodes: Iterable[NodeInfo],
               pods: Iterable[PodInfo], members: Mapping[tuple[str, str], Member],
               pdbs: Sequence[PdbInfo], paused: frozenset[str] = frozenset()) -> int | None:
    """A digest of everything ``plan_drains`` reads but the metadata Compactor writes on Pods
    (its labels and intent annotation change on every Pod while a policy change is carried
    out, and nothing the plan decides depends on them); None when a budget or a Pod's
    anti-affinity selects on one of those labels, so that no plan may be reused. Every field
    of ``PodInfo`` and ``NodeInfo`` is in it, so a field added later is too."""
    if any(_selects_own(b.selector) for b in pdbs):
        return None
    pod_keys = []
    placements: dict[int, str] = {}  # most Pods share a few records: one repr each
    for p in pods:
        if p.placement is not UNCONSTRAINED and id(p.placement) not in placements:
            if any(_selects_own(t.selector) for t in p.placement.anti_affinity):
                return None
            placements[id(p.placement)] = repr(p.placement)
        row: list[object] = []
        for name in _POD_FIELDS:
            if name == "labels":
                row.append(tuple(kv for kv in p.labels.items() if kv[0] not in _OWN_POD_LABELS))
            elif name == "annotations":
                row.append(tuple(p.annotations.get(a) for a in _READ_ANNOTATIONS))
            elif name == "placement":
                row.append(placements.get(id(p.placement), ""))
            else:
                row.append(_frozen(getattr(p, name)))
        row.append(members.get(p.key))
        pod_keys.append(tuple(row))
    return hash((
        tuple((repr(policy), repr(pool)) for policy, pool in policies), tuple(sorted(paused)),
        tuple(tuple(_frozen(getattr(n, f)) for f in _NODE_FIELDS) for n in nodes),
        tuple(pod_keys), tuple(repr(b) for b in pdbs)))


def reuse_or_plan(memo: DrainMemo | None, policies: Sequence[tuple[Policy, LabelSelector]],
                  nodes: Sequence[NodeInfo], pods: Sequence[PodInfo],
                  members: Mapping[tuple[str, str], Member], pdbs: Sequence[PdbInfo],
                  now: datetime.datetime, drain_timeout: datetime.timedelta = DRAIN_TIMEOUT,
                  paused: frozenset[str] = frozenset()
                  ) -> tuple[list[DrainPlan], DrainMemo | None]:
    """``plan_drains``, or the last plans while nothing they read has changed."""
    key = inputs_key(policies, nodes, pods, members, pdbs, paused)
    if key is not None and memo is not None and memo.key == key and now - memo.at < REUSE:
        return list(memo.plans), memo
    plans = plan_drains(policies, nodes, pods, members, pdbs, now, drain_timeout, paused)
    return plans, None if key is None else DrainMemo(key, now, tuple(plans))
