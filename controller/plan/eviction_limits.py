"""The workloads' eviction budgets and the rule against ping-pong, read from the cluster and
kept on it. Pure.

Each pass reads, per managed workload, its budget (``compactor.dev/eviction-budget``) and the
evictions Compactor counted against it (``compactor.dev/evictions``,
``compaction.eviction_budget``), and works out what may be evicted now (``Allowance``):

- a Pod created after one of Compactor's evictions of its workload is not evicted until it
  has run the policy's ``evictReplacementsAfter``, so that nothing ping-pongs: it keeps its
  node, or, on a node a drain empties already, waits there while the drain goes on;
- a workload whose budget is spent, or invalid, has no Pod evicted; one whose budget has room
  has at most that many more.

An eviction is counted when it is decided, before it happens: a Pod the drains mark for their
descheduler, a Pod the runtime hook evicts. So a controller that stops between the two has
counted it, and the descheduler can never go past a budget. A Pod counted whose eviction did
not happen (its mark withdrawn, its eviction refused) is still there, unmarked, a minute on:
it is given back. A record keeps what a rule still reads, and no more.
"""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from compaction import names
from compaction.eviction_budget import EvictionBudget, Evictions, parse_budget
from compaction.policy import DEFAULT_EVICT_REPLACEMENTS_AFTER, Policy
from controller.drain_planner.allowance import Allowance
from controller.drain_planner.reasons import Code, Reason
from controller.plan.actions import Action, Patch, Target
from controller.plan.events import workload_event
from controller.plan.membership import Membership, by_workload
from controller.snapshot.pod import PodInfo
from controller.snapshot.workload import WorkloadInfo, WorkloadKey

PodKey = tuple[str, str]
# A Pod counted, still there and unmarked this long after: its eviction did not happen.
GRACE: Final = datetime.timedelta(minutes=1)
# A record keeps an eviction at least this long, whatever the rules read now: a budget or an
# interval set again soon after finds the evictions it counts.
KEEP: Final = 2 * DEFAULT_EVICT_REPLACEMENTS_AFTER
INVALID_EVENT: Final = "EvictionBudgetInvalid"


@dataclass(frozen=True)
class Limits:
    """What one pass read: each managed workload's budget (None: none set; a string: the
    invalid value), its record as this pass keeps it, and what may be evicted now."""

    budgets: Mapping[WorkloadKey, EvictionBudget | str | None] = field(default_factory=dict)
    records: Mapping[WorkloadKey, Evictions] = field(default_factory=dict)
    allowance: Allowance = Allowance()
    # Each workload's Pods created within the second of this pass (no replacements of its
    # evictions).
    peers: Mapping[WorkloadKey, tuple[str, ...]] = field(default_factory=dict)

    def held_counts(self) -> dict[str, int]:
        """Pods Compactor may not evict now, by reason code."""
        counts = Counter(r.code.value for r in self.allowance.held.values())
        counts[Code.RECENTLY_REPLACED.value] += len(self.allowance.waiting)
        return {code: n for code, n in counts.items() if n}


def label(workload: WorkloadInfo) -> str:
    v = workload.view
    return f"{v.kind.value} {v.namespace}/{v.name}"


def _budget(workload: WorkloadInfo) -> EvictionBudget | str | None:
    value = workload.annotations.get(names.EVICTION_BUDGET_ANNOTATION)
    if value is None:
        return None
    try:
        return parse_budget(value)
    except ValueError:
        return value


def _kept(record: Evictions, keep: datetime.timedelta, present: Mapping[str, PodInfo],
          now: datetime.datetime) -> Evictions:
    """The record without what no rule reads any more, nor the evictions that did not
    happen."""
    def stays(at: datetime.datetime, uid: str) -> bool:
        pod = present.get(uid)
        undone = pod is not None and not pod.deleting and \
            names.DRAINING_LABEL not in pod.labels and now - at >= GRACE
        return now - at < keep and not undone
    return record.keeping(e for e in record.entries if stays(e.at, e.pod_uid))


def limits(decided: Mapping[WorkloadKey, tuple[WorkloadInfo, Policy | None]],
           members: Mapping[PodKey, Membership], pods: Sequence[PodInfo],
           now: datetime.datetime, draining: frozenset[str] = frozenset()) -> Limits:
    """``draining``: the nodes the drains under way empty (tainted)."""
    present = {p.uid: p for p in pods}
    grouped = by_workload(pods, members)
    budgets: dict[WorkloadKey, EvictionBudget | str | None] = {}
    records: dict[WorkloadKey, Evictions] = {}
    held: dict[PodKey, Reason] = {}
    waiting: set[PodKey] = set()
    budget_of: dict[PodKey, str] = {}
    left: dict[str, int] = {}
    second = now.replace(microsecond=0)
    peers = {key: tuple(p.uid for p in mine if p.created is not None and p.created >= second)
             for key, mine in grouped.items()}
    for key, (workload, policy) in decided.items():
        if policy is None:
            continue
        budget = budgets[key] = _budget(workload)
        after = policy.descheduler.evict_replacements_after
        keep = max(budget.window if isinstance(budget, EvictionBudget) else KEEP, 2 * after,
                   KEEP)
        record = records[key] = _kept(
            Evictions.parse(workload.annotations.get(names.EVICTIONS_ANNOTATION)), keep,
            present, now)
        counted = record.uids
        first = min(record.times, default=None)
        before = frozenset(u for e in record.entries if e.at == first for u in e.peers)
        name = label(workload)
        room = budget.left(record.times, now) if isinstance(budget, EvictionBudget) else 0
        for pod in grouped.get(key, ()):
            if pod.uid in counted:  # its eviction is decided, and counted already
                continue
            # Created after an eviction (within its second, unless it was there then).
            recent = first is not None and pod.created is not None and (
                pod.created > first or pod.created == first and pod.uid not in before) and \
                now - pod.created < after
            if recent and pod.node_name in draining:
                waiting.add(pod.key)
            elif recent:
                # The text stays the same while the Pod is held: a plan whose inputs did
                # not change is reused.
                held[pod.key] = Reason(Code.RECENTLY_REPLACED, (
                    f"pod {pod.namespace}/{pod.name} replaced one Compactor evicted less than "
                    f"evictReplacementsAfter ({_age(after)}) ago"))
            elif isinstance(budget, str):
                held[pod.key] = Reason(Code.EVICTION_BUDGET, (
                    f"{name}'s {names.EVICTION_BUDGET_ANNOTATION} {budget!r} is invalid: "
                    "Compactor evicts none of its Pods"))
            elif isinstance(budget, EvictionBudget) and room == 0:
                held[pod.key] = Reason(Code.EVICTION_BUDGET, (
                    f"{name} spent its eviction budget {budget.count}/{_age(budget.window)}"))
            elif isinstance(budget, EvictionBudget):
                budget_of[pod.key] = name
                left[name] = room
    return Limits(budgets, records, Allowance(held, budget_of, left, frozenset(waiting)),
                  peers)


def _problem(value: str) -> str:
    try:
        parse_budget(value)
    except ValueError as e:
        return str(e)
    return f"{value!r} is invalid"


def _age(d: datetime.timedelta) -> str:
    seconds = int(d.total_seconds())
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (s, "s")) if v) or "0s"


def after_moves(allowance: Allowance, moved: Iterable[PodKey],
                replaced_hold: Mapping[PodKey, bool]) -> Allowance:
    """``allowance`` once the Pods ``moved`` have been evicted and replaced, as the preview
    plays the passes out: each spends its budget, and its replacement is held where its
    policy's ``evictReplacementsAfter`` is set (``replaced_hold``)."""
    moved = list(moved)
    if not moved:
        return allowance
    spent = Counter(b for k in moved if (b := allowance.budget_of.get(k)) is not None)
    held = dict(allowance.held)
    for k in moved:
        if replaced_hold.get(k):
            held.setdefault(k, Reason(Code.RECENTLY_REPLACED, (
                f"pod {k[0]}/{k[1]} replaced one Compactor evicted less than "
                "evictReplacementsAfter ago")))
    left = {b: max(0, n - spent[b]) for b, n in allowance.left.items()}
    return replace(allowance, held=held, left=left, budget_of={
        k: b for k, b in allowance.budget_of.items() if k not in held})


def budget_room(allowance: Allowance, pods: Iterable[PodInfo], marked: Iterable[PodKey]
                ) -> int | None:
    """The evictions a workload's budget (of its ``pods``) still allows once this pass's new
    marks (``marked``) are counted; None: no budget limits it."""
    name = next((b for p in pods if (b := allowance.budget_of.get(p.key)) is not None), None)
    if name is None:
        return None
    return allowance.left.get(name, 0) - sum(1 for k in marked
                                             if allowance.budget_of.get(k) == name)


def record_patches(decided: Mapping[WorkloadKey, tuple[WorkloadInfo, Policy | None]],
                   found: Limits, counted: Mapping[WorkloadKey, Iterable[str]],
                   now: datetime.datetime) -> list[Action]:
    """The records that change this pass, ``counted`` (the uids of the Pods each workload's
    evictions this pass decides) added; an invalid budget value named, once, by a Warning
    Event."""
    out: list[Action] = []
    for key, record in sorted(found.records.items()):
        workload = decided[key][0]
        budget = found.budgets.get(key)
        new = record.adding(counted.get(key, ()), now, found.peers.get(key, ()))
        event = None
        if isinstance(budget, str) and record.warned != budget:
            new = replace(new, warned=budget)
            event = workload_event(workload, INVALID_EVENT, (
                f"{names.EVICTION_BUDGET_ANNOTATION}: {_problem(budget)}; Compactor evicts "
                "none of this workload's Pods until it is valid"), "Warning")
        elif not isinstance(budget, str) and record.warned:
            new = replace(new, warned="")
        text = new.render() if new.entries or new.warned else None
        if text == workload.annotations.get(names.EVICTIONS_ANNOTATION):
            continue
        out.append(Patch(workload.path, {"metadata": {"annotations": {
            names.EVICTIONS_ANNOTATION: text}}}, Target.STATE,
            then=(event,) if event is not None else ()))
    return out
