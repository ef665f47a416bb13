"""What the passes would free one after the other, for the preview. Pure.

One pass starts only the drains it may (``maxDrainingNodes``) and holds back a node that would
draw the Pods of a drain it starts now (``drain_planner.attraction``): the passes after it free
the rest. The preview forecasts them all. It plays each plan out as planned (every Pod it moves
on its destination, every node it frees left empty) and plans again, until a plan frees no
node more.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Final

from controller.drain_planner.drain_plan import DrainPlan
from controller.snapshot.pod import PodInfo

# Plans at most: each frees at least one node more than the one before, or ends the forecast.
ROUNDS: Final = 20


def played_out(pods: Sequence[PodInfo], plans: Sequence[DrainPlan]) -> tuple[PodInfo, ...]:
    """``pods`` once every Pod the plans move stands on its destination."""
    moves = {key: node for p in plans for key, node in p.moves.items()}
    return tuple(replace(p, node_name=moves[p.key]) if p.key in moves else p for p in pods)


def _merged(first: DrainPlan, later: Sequence[DrainPlan]) -> DrainPlan:
    """One policy's plans in turn as one: what each frees, in order, and where each moves a
    Pod; why the rest stay, as the last says; what starts now, as the first does."""
    freeable = list(first.freeable)
    moves, costs = dict(first.moves), dict(first.costs)
    for plan in later:
        freeable += [n for n in plan.freeable if n not in freeable]
        moves.update(plan.moves)
        costs = {**plan.costs, **costs}  # a node's cost as the plan that first frees it says
    last = later[-1] if later else first
    return replace(first, freeable=tuple(freeable), moves=moves, costs=costs,
                   unremovable=tuple(u for u in last.unremovable if u.node not in freeable))


def eventually(choose: Callable[[Sequence[PodInfo]], Sequence[DrainPlan]],
               pods: Sequence[PodInfo]) -> tuple[DrainPlan, ...]:
    """The plans ``choose`` makes of ``pods``, pass after pass, merged per policy."""
    first = list(choose(pods))
    rounds: list[list[DrainPlan]] = []
    freed = {n for p in first for n in p.freeable}
    current = played_out(pods, first)
    for _ in range(ROUNDS):
        plans = list(choose(current))
        new = {n for p in plans for n in p.freeable} - freed
        if not new:
            break
        rounds.append(plans)
        freed |= new
        current = played_out(current, plans)
    return tuple(_merged(p, [r[i] for r in rounds]) for i, p in enumerate(first))


def _in_use(pods: Sequence[PodInfo]) -> set[str]:
    """Nodes holding a Pod but a DaemonSet's or a mirror Pod (placeholders count, as the
    preview counts them)."""
    return {p.node_name for p in pods if p.occupies and not (p.daemon or p.mirror)}


def with_replacements(before: Sequence[PodInfo], after: Sequence[PodInfo],
                      plans: Sequence[DrainPlan], policy_of: Mapping[tuple[str, str], str]
                      ) -> tuple[DrainPlan, ...]:
    """``plans`` (of the cluster ``after`` the runtime hook's replacements) with what the
    replacements themselves did: the Pods they moved, and the nodes they emptied, first, in
    the plan of the policy whose Pods left each node."""
    moved = {b.key: a.node_name for b, a in zip(before, after, strict=True)
             if b.node_name != a.node_name}
    emptied = sorted(_in_use(before) - _in_use(after))
    out = []
    for plan in plans:
        mine = {key: node for key, node in moved.items() if policy_of.get(key) == plan.policy}
        left = Counter(b.node_name for b in before if b.key in mine)
        nodes = [n for n in emptied if n in left]
        out.append(replace(plan, freeable=(*nodes, *plan.freeable),
                           nodes_in_use=tuple(sorted({*plan.nodes_in_use, *nodes})),
                           moves={**mine, **plan.moves},
                           # each replacement is an eviction of the runtime hook's
                           costs={**{n: left[n] for n in nodes}, **plan.costs}))
    return tuple(out)
