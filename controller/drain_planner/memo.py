"""The last drain plans, reused while nothing they read has changed. Pure.

Passes that carry a policy change onto thousands of Pods come every few seconds, and a plan
of 500 nodes costs a second each time; the labels and intent Compactor itself writes on Pods
change on every one of them, and nothing the plan decides depends on those.
"""

from __future__ import annotations

import dataclasses
import datetime
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from compaction import names
from compaction.policy import Policy
from compaction.selector import LabelSelector
from controller.drain_planner.allowance import NONE, Allowance
from controller.drain_planner.drain_plan import DRAIN_TIMEOUT, DrainPlan, Member
from controller.drain_planner.planner import choose_drains
from controller.snapshot.constraints import UNCONSTRAINED
from controller.snapshot.node import NodeInfo
from controller.snapshot.pdb import PdbInfo
from controller.snapshot.pod import PodInfo

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
_READ_ANNOTATIONS: Final = (names.SAFE_TO_EVICT_ANNOTATION, names.DO_NOT_DISRUPT_ANNOTATION,
                            names.MIRROR_ANNOTATION)
# Fields left out of a node's digest: the resourceVersion moves with every status heartbeat.
_NODE_UNREAD: Final = frozenset({"resource_version"})
# A Pod's fields digested other than as they are: only in part, or by a shared record.
_POD_OWN: Final = frozenset({"labels", "annotations", "constraints"})


def _is_mapping(f: dataclasses.Field[Any]) -> bool:
    """Whether a field is declared a mapping: digested as its items. (A mapping read as a
    plain field would fail loudly, a dict having no hash; it could not be missed.)"""
    declared = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
    return declared.split("[", 1)[0].rsplit(".", 1)[-1] in ("Mapping", "dict")


def _fields(cls: type[Any], unread: frozenset[str]
            ) -> tuple[Callable[[Any], object], tuple[str, ...]]:
    """Every field of ``cls`` but ``unread``: one getter of the plain ones, and the names of
    the mappings. Derived from the dataclass, so that a field added later is digested too."""
    read = [f for f in dataclasses.fields(cls) if f.name not in unread]
    return (operator.attrgetter(*(f.name for f in read if not _is_mapping(f))),
            tuple(f.name for f in read if _is_mapping(f)))


_POD_PLAIN, _POD_MAPPINGS = _fields(PodInfo, _POD_OWN)
_NODE_PLAIN, _NODE_MAPPINGS = _fields(NodeInfo, _NODE_UNREAD)
_MEMBER: Final = operator.attrgetter(*(f.name for f in dataclasses.fields(Member)))


def inputs_key(policies: Sequence[tuple[Policy, LabelSelector]], nodes: Iterable[NodeInfo],
               pods: Iterable[PodInfo], members: Mapping[tuple[str, str], Member],
               pdbs: Sequence[PdbInfo], paused: frozenset[str] = frozenset(),
               allowance: Allowance = NONE) -> int | None:
    """A digest of everything ``choose_drains`` reads but the metadata Compactor writes on Pods
    (its labels and intent annotation change on every Pod while a policy change is carried
    out, and nothing the plan decides depends on them); None when a budget or a Pod's
    anti-affinity selects on one of those labels, so that no plan may be reused. Every field
    of ``PodInfo`` and ``NodeInfo`` is in it, so a field added later is too."""
    if any(_selects_own(b.selector) for b in pdbs):
        return None
    pod_keys: list[int] = []
    # Most Pods share a few constraints and member records: one repr or tuple each, by
    # identity (every record stays referenced, so no id is reused while this runs).
    constraint_texts: dict[int, str] = {id(UNCONSTRAINED): ""}
    member_rows: dict[int, object] = {}
    for p in pods:
        constraints_text = constraint_texts.get(id(p.constraints))
        if constraints_text is None:
            if any(_selects_own(t.selector) for t in p.constraints.anti_affinity):
                return None
            constraints_text = constraint_texts[id(p.constraints)] = repr(p.constraints)
        member = members.get(p.key)
        row = member_rows.get(id(member))
        if row is None and member is not None:
            row = member_rows[id(member)] = _MEMBER(member)
        labels = p.labels
        # Hashed at once: a row kept until the end would be one of ~10 objects per Pod
        # alive at once, and their number is what sets the garbage collector off.
        pod_keys.append(hash((
            _POD_PLAIN(p), tuple([tuple(getattr(p, f).items()) for f in _POD_MAPPINGS]),
            tuple(labels.items()) if _OWN_POD_LABELS.isdisjoint(labels) else
            tuple(kv for kv in labels.items() if kv[0] not in _OWN_POD_LABELS),
            tuple(map(p.annotations.get, _READ_ANNOTATIONS)), constraints_text, row)))
    return hash((
        tuple((repr(policy), repr(pool)) for policy, pool in policies), tuple(sorted(paused)),
        tuple(hash((_NODE_PLAIN(n), tuple([tuple(getattr(n, f).items()) for f in _NODE_MAPPINGS])))
              for n in nodes),
        tuple(pod_keys), tuple(repr(b) for b in pdbs), allowance.digest()))


def reuse_or_choose(memo: DrainMemo | None, policies: Sequence[tuple[Policy, LabelSelector]],
                    nodes: Sequence[NodeInfo], pods: Sequence[PodInfo],
                    members: Mapping[tuple[str, str], Member], pdbs: Sequence[PdbInfo],
                    now: datetime.datetime, drain_timeout: datetime.timedelta = DRAIN_TIMEOUT,
                    paused: frozenset[str] = frozenset(),
                    protected: frozenset[str] = names.PROTECTED_NAMESPACES,
                    allowance: Allowance = NONE) -> tuple[list[DrainPlan], DrainMemo | None]:
    """``choose_drains``, or the last plans while nothing they read has changed (``protected``,
    fixed by the install namespace, never does)."""
    key = inputs_key(policies, nodes, pods, members, pdbs, paused, allowance)
    if key is not None and memo is not None and memo.key == key and now - memo.at < REUSE:
        return list(memo.plans), memo
    plans = choose_drains(policies, nodes, pods, members, pdbs, now, drain_timeout, paused,
                          protected, allowance)
    return plans, None if key is None else DrainMemo(key, now, tuple(plans))
