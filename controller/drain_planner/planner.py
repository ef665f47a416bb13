"""Which nodes to drain, decided once per pass for the whole cluster. Pure.

Several policies may share nodes: each workload has one effective policy, and that policy's
descheduler evicts that workload's Pods. So the plan is one for all policies:

- a node can be freed when every Pod on it that must keep running fits elsewhere (placed by
  ``controller.drain_planner.simulated_cluster`` as the compaction scheduler would), and every Pod
  that must move is movable under its own policy: the rule of ``compaction.safety``, its budgets,
  its evictor's label selector, no toleration of the drain taint;
- every policy with Pods on the node must allow it as a source: the node is in its pool,
  at or below its thresholds, and its ``numberOfNodes`` gate is open (a node with Pods of no
  policy is judged by the policies whose pool holds it);
- Pods of no policy block, as do Pods a policy's rendered descheduler config would never
  evict; DaemonSet and mirror Pods never block; placeholders (priority at or below -10) must
  fit elsewhere but are never evicted (the autoscaler removes a node that runs only those);
- a node is freed only while the evictions it costs are within the ``maxEvictionsToFreeNode``
  of every policy judging it (``gates``) and its workloads' eviction budgets (``allowance``);
- a drain starts only while every policy with Pods to move there may start one: its
  descheduler is enabled, it is not paused (``paused``), and fewer than its
  ``maxDrainingNodes`` of its nodes drain already.

Candidates are tried cheapest first, as Karpenter tries them: fewest evictions, then fewest
Pods and least requested; so when ``maxDrainingNodes`` holds the drains back, the nodes that
drain are the cheapest to free. The plans come back per policy, as status shows them: the
nodes each policy takes part in draining, and the nodes its Pods are on that cannot be freed,
with the real reason.
"""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import takewhile
from typing import Final

from compaction import names
from compaction.descheduler_scope import DeschedulerScope
from compaction.policy import DefaultEvictor, Policy, SchedulerMode
from compaction.safety import Hold, eviction_hold, is_placeholder
from compaction.selector import LabelSelector
from compaction.utilization import Utilization, is_underutilized
from controller.drain_planner.allowance import NONE, Allowance
from controller.drain_planner.attraction import attracting
from controller.drain_planner.drain_plan import (
    DRAIN_TIMEOUT,
    DrainPlan,
    Member,
    Unremovable,
    next_evictions,
)
from controller.drain_planner.eligibility import Scope, _hold_reason, blocker
from controller.drain_planner.gates import gates
from controller.drain_planner.reasons import Code, Reason
from controller.drain_planner.sim_node import SimNode, largest_first, leaving, utilization
from controller.drain_planner.simulated_cluster import Cluster
from controller.drain_planner.taint import drain_owner, tolerates_drain
from controller.snapshot.constraints import Taint
from controller.snapshot.fields import parse_time
from controller.snapshot.node import NodeInfo
from controller.snapshot.pdb import PdbInfo, by_namespace
from controller.snapshot.pod import PodInfo

MAX_REPLANS: Final = 3  # plans per pass while a node freed later draws a drain's Pod


@dataclass
class _Site:
    """A node's Pods, sorted by what the plan may do with them."""

    node: SimNode
    movable: dict[str, list[PodInfo]] = field(default_factory=dict)  # policy id -> its Pods
    riders: list[PodInfo] = field(default_factory=list)  # placeholders
    blockers: list[Reason] = field(default_factory=list)
    stakeholders: set[str] = field(default_factory=set)  # policies with Pods here

    @property
    def name(self) -> str:
        return self.node.info.name

    @property
    def empty(self) -> bool:
        """Nothing but DaemonSet and mirror Pods runs here."""
        return not (self.movable or self.riders or self.blockers)

    def evictions(self) -> int:
        """What freeing the node costs: its Pods to evict (placeholders move without one)."""
        return sum(map(len, self.movable.values()))

    def size(self) -> int:
        return self.evictions() + len(self.riders)


def _may_source(node: NodeInfo) -> bool:
    """Ready, schedulable and staying: a node the numberOfNodes gate counts, and may drain."""
    return node.ready and not node.unschedulable and not leaving(node)


def _scopes(policies: Sequence[tuple[Policy, LabelSelector]], cluster: Cluster
            ) -> dict[str, Scope]:
    """Each policy as the plan reads it, by id. Policies often share a pool: its nodes and
    their utilization (before any move) are read once for all of them."""
    pools: dict[LabelSelector, tuple[frozenset[str], list[Utilization]]] = {}
    for _, pool in policies:
        if pool not in pools:
            members = cluster.in_pool(pool)
            pools[pool] = (frozenset(n.info.name for n in members),
                           [utilization(n) for n in members if _may_source(n.info)])
    scopes = {}
    for policy, pool in policies:
        hnu = policy.descheduler.high_node_utilization
        nodes, sources = pools[pool]
        under = sum(1 for u in sources if is_underutilized(u, hnu.thresholds))
        d = policy.descheduler
        scopes[policy.id] = Scope(
            policy, DeschedulerScope.of(policy), pool, nodes, (under > hnu.number_of_nodes, under),
            min(d.max_pods_to_evict_per_node, d.max_pods_to_evict_per_namespace,
                d.max_pods_to_evict_total) >= 1)
    return scopes


def _site(node: SimNode, scopes: Mapping[str, Scope],
          members: Mapping[tuple[str, str], Member], pdbs: Mapping[str, Sequence[PdbInfo]],
          tolerant: dict[int, bool], protected: frozenset[str], allowance: Allowance) -> _Site:
    """``tolerant``: whether a Pod's constraints tolerate the drain taint, by its identity, filled
    as they are met. The snapshot shares one Constraints among the Pods with the same
    constraints, and every Pod outlives the plan (so no id is reused while it runs).
    ``pdbs``: the budgets, by namespace (``by_namespace``). ``protected``: the namespaces
    whose Pods are never evicted (``names.protected_namespaces`` of the install namespace)."""
    site = _Site(node)
    for pod in node.pods:
        if pod.daemon or pod.mirror or pod.deleting:  # a Terminating Pod leaves by itself
            continue
        if is_placeholder(pod.priority):
            site.riders.append(pod)
            continue
        member = members.get(pod.key)
        scope = scopes.get(member.policy) if member and member.policy else None
        if scope is None:
            hold = eviction_hold(pod, member.kind if member else None,
                                 DefaultEvictor(), protected)
            site.blockers.append(
                _hold_reason(pod, hold, None) if hold in (Hold.PROTECTED_NAMESPACE,
                                                          Hold.BARE_POD) else
                Reason(Code.NO_POLICY, f"pod {pod.namespace}/{pod.name} belongs to no "
                       "compaction policy (Compactor never evicts it)"))
            continue
        assert member is not None and member.policy is not None
        tolerates = tolerant.get(id(pod.constraints))
        if tolerates is None:
            tolerates = tolerant[id(pod.constraints)] = tolerates_drain(pod.constraints.tolerations)
        reason = blocker(pod, member, scope, pdbs.get(pod.namespace, ()), tolerates,
                         protected) or allowance.hold(pod)
        # Scopes are keyed by policy id: the member's policy is its scope's id.
        site.stakeholders.add(member.policy)
        if reason is not None:
            site.blockers.append(reason)
        elif (mine := site.movable.get(member.policy)) is not None:
            mine.append(pod)
        else:
            site.movable[member.policy] = [pod]
    return site


def _governing(site: _Site, scopes: Mapping[str, Scope]) -> list[Scope]:
    return [scopes[p] for p in _governing_ids(site, scopes)]


def _governing_ids(site: _Site, scopes: Mapping[str, Scope]) -> list[str]:
    """The policies that judge the node as a source, by id (in order): those with Pods on
    it, or, where no policy has any, those whose pool holds it."""
    if site.stakeholders:
        return sorted(site.stakeholders)
    return sorted(p for p, s in scopes.items() if site.name in s.nodes)


def _passengers(site: _Site, scopes: Mapping[str, Scope], governing: Sequence[Scope]
                ) -> tuple[list[tuple[PodInfo, LabelSelector]], set[tuple[str, str]]]:
    """Every Pod that must leave the node, with the pool it may go to: its policy's; for a
    placeholder, the pool of the first policy judging the node. And the Pods whose
    replacements a scheduler other than the compaction scheduler places."""
    rider_pool = governing[0].pool if governing else LabelSelector()
    unread = {p.key for policy, pods in site.movable.items()
              if scopes[policy].policy.scheduler.mode is not SchedulerMode.MANAGED for p in pods}
    return [*((p, scopes[policy].pool) for policy, pods in sorted(site.movable.items())
              for p in pods), *((p, rider_pool) for p in site.riders)], unread


def _move(cluster: Cluster, site: _Site, scopes: Mapping[str, Scope],
          governing: Sequence[Scope]) -> Reason | None:
    passengers, unread = _passengers(site, scopes, governing)
    return cluster.move(passengers, site.name, unread)


def _order(site: _Site) -> tuple[bool, int, int, float, str]:
    """Fewest evictions, then fewest Pods, least requested, name: the cheapest first. A node
    only placeholders hold comes last: it needs no drain (an autoscaler removes it), and its
    placeholders must take no room a drain needs."""
    u = utilization(site.node)
    cost = site.evictions()
    return (not (cost or site.blockers), cost, site.size(), u.cpu + u.memory, site.name)


@dataclass
class _Outcome:
    """The cluster's plan as it grows, per node; split per policy at the end."""

    freeable: list[str] = field(default_factory=list)
    draining: list[str] = field(default_factory=list)
    drained: list[str] = field(default_factory=list)
    abandoned: dict[str, Reason] = field(default_factory=dict)
    unremovable: dict[str, list[Reason]] = field(default_factory=dict)


def choose_drains(policies: Sequence[tuple[Policy, LabelSelector]], nodes: Iterable[NodeInfo],
                  pods: Iterable[PodInfo], members: Mapping[tuple[str, str], Member],
                  pdbs: Sequence[PdbInfo], now: datetime.datetime,
                  drain_timeout: datetime.timedelta = DRAIN_TIMEOUT,
                  paused: frozenset[str] = frozenset(),
                  protected: frozenset[str] = names.PROTECTED_NAMESPACES,
                  allowance: Allowance = NONE) -> list[DrainPlan]:
    """One plan for the whole cluster, returned per policy in name order. ``paused``: the
    policies that may start no drain now (the drains under way go on); ``protected``: the
    namespaces whose Pods always block (kube-system and the install namespace). Made again, a
    few times at most, while a node it frees later would draw a Pod of a drain it starts now
    (``attraction``): that node stays for now."""
    nodes, pods = list(nodes), list(pods)
    held: dict[str, Reason] = {}
    for _ in range(MAX_REPLANS):
        plans, more = _choose(policies, nodes, pods, members, pdbs, now, drain_timeout,
                              paused, protected, held, allowance)
        if not more:
            break
        held |= more
    return plans


def _choose(policies: Sequence[tuple[Policy, LabelSelector]], nodes: Iterable[NodeInfo],
            pods: Iterable[PodInfo], members: Mapping[tuple[str, str], Member],
            pdbs: Sequence[PdbInfo], now: datetime.datetime,
            drain_timeout: datetime.timedelta, paused: frozenset[str],
            protected: frozenset[str], held: Mapping[str, Reason],
            allowance: Allowance = NONE) -> tuple[list[DrainPlan], dict[str, Reason]]:
    """The plan, ``held`` kept for their reasons; the nodes it frees later that would draw a
    Pod of the drains it starts now."""
    cluster = Cluster(nodes, pods)
    scopes = _scopes(policies, cluster)
    considered = set().union(*(s.nodes for s in scopes.values())) if scopes else set()
    tolerant: dict[int, bool] = {}
    budgets = by_namespace(pdbs)
    sites = {name: _site(cluster.nodes[name], scopes, members, budgets, tolerant, protected,
                         allowance) for name in sorted(considered)}
    tainted = {n.info.name: t for n in cluster.nodes.values()
               if (t := drain_owner(n.info)) is not None}
    out = _Outcome()
    budget, spent = Counter[str](), Counter[str]()  # drains per policy; evictions per budget
    # A node only placeholders hold is free only where they may go elsewhere: one with a
    # placeholder that no other node admits stays in use, and every move must know it.
    for site in sites.values():
        if site.riders and not (site.movable or site.blockers) and any(
                cluster.nowhere_else(p, site.name) for p in site.riders):
            cluster.keep(site.name)

    # The drains under way come first: kept while the plan holds.
    for name, taint in sorted(tainted.items()):
        site = sites.get(name) or _site(cluster.nodes[name], scopes, members, budgets, tolerant,
                                        protected, allowance)
        sites[name] = site
        governing = _governing(site, scopes)
        if not site.movable:
            if site.blockers:  # what is left can never move: the node will not be freed
                out.abandoned[name] = site.blockers[0]
            else:
                out.drained.append(name)
                cluster.empty(name)
            continue
        started = parse_time(taint.time_added)
        stopped = next((s for s in governing if not s.policy.descheduler.enabled), None)
        outside = next((s for s in governing if name not in s.nodes), None)
        reason = (
            Reason(Code.TIMED_OUT, f"the drain did not finish within {drain_timeout}")
            if started is not None and now - started > drain_timeout
            else Reason(Code.NOT_READY, "node turned not ready while it drained")
            if not site.node.info.ready
            else site.blockers[0] if site.blockers
            else Reason(Code.LEAVING, "node is being removed by an autoscaler")
            if leaving(site.node.info)
            else Reason(Code.LEFT_POOL, "node left the policy's node pool") if outside
            else Reason(Code.DESCHEDULER_DISABLED, f"policy {stopped.policy.id}'s descheduler "
                        "is disabled") if stopped
            else allowance.over(cost := allowance.cost(site.movable), spent)
            or _move(cluster, site, scopes, governing))
        if reason is None:
            spent.update(cost)
            out.freeable.append(name)
            out.draining.append(name)
            budget.update(site.movable.keys())
        else:
            out.abandoned[name] = reason

    for site in sorted((s for s in sites.values() if s.name not in tainted), key=_order):
        if site.empty:
            continue
        if site.name in cluster.received:  # what else holds it is worth knowing too
            out.unremovable[site.name] = [*site.blockers, Reason(
                Code.DESTINATION, "takes Pods of the nodes planned to drain first")]
            continue
        governing = _governing(site, scopes)
        reasons = site.blockers + gates(site.node, governing, site.evictions())
        if site.name in held:
            reasons.append(held[site.name])
        if not reasons and (over := allowance.over(cost := allowance.cost(site.movable), spent)):
            reasons.append(over)
        if not reasons:
            failure = _move(cluster, site, scopes, governing)
            if failure is None:
                spent.update(cost)
                out.freeable.append(site.name)
                if site.movable and all(_may_start(scopes[p], paused, budget)
                                        for p in site.movable):
                    out.draining.append(site.name)
                    budget.update(site.movable.keys())
                continue
            reasons.append(failure)
        out.unremovable[site.name] = reasons
        cluster.keep(site.name)
    now_draining = set(out.draining)
    moved_now = {n: [p for ps in sites[n].movable.values() for p in ps] for n in now_draining}
    later = [n for n in out.freeable if n not in now_draining and n not in tainted]
    more = attracting(cluster, moved_now, later) if moved_now and later else {}
    return _per_policy(scopes, sites, tainted, out, cluster, allowance.waiting), more


def _may_start(scope: Scope, paused: frozenset[str], budget: Counter[str]) -> bool:
    d = scope.policy.descheduler
    return d.enabled and scope.policy.id not in paused and budget[scope.policy.id] < \
        d.max_draining_nodes


def _turn(site: _Site, waiting: frozenset[tuple[str, str]]) -> tuple[str, list[PodInfo]]:
    """Whose Pods leave a node shared by several policies now, and which may: the policy of
    the first Pod in the order the simulation placed them (the largest first), and its Pods
    up to the next policy's. Each policy's descheduler runs when its CronJob fires, in no
    order; marked one policy at a time, the Pods leave in the order the plan placed them,
    whichever fires first, and the next are marked once they have gone. A Pod ``waiting``
    (too recently a replacement) is not marked yet."""
    ordered = sorted(((p, pid) for pid, pods in site.movable.items() for p in pods
                      if p.key not in waiting), key=lambda pp: largest_first(pp[0]))
    first = ordered[0][1] if ordered else ""
    return first, [p for p, _ in takewhile(lambda pp: pp[1] == first, ordered)]


def _per_policy(scopes: Mapping[str, Scope], sites: Mapping[str, _Site],
                tainted: Mapping[str, Taint], out: _Outcome, cluster: Cluster,
                waiting: frozenset[tuple[str, str]]) -> list[DrainPlan]:
    """The plan split per policy. What policies share (a pool's nodes in use, the sorted
    verdicts, the moves) is gathered once for all of them, then filtered per policy."""
    listed = {name: set(_governing_ids(site, scopes)) for name, site in sites.items()}
    for name, taint in tainted.items():  # a drain is also its starter's to report
        if taint.value in scopes and name in listed:
            listed[name].add(taint.value)
    in_use: dict[LabelSelector, tuple[str, ...]] = {}
    # Each policy's moves are listed in the order they were planned.
    position = {key: i for i, key in enumerate(cluster.moves)}
    # The verdicts of the nodes each policy is listed on, in name order, gathered in one pass
    # over the nodes; policies listed on a node show the same verdict but for whether their
    # Pods run there.
    abandoned: dict[str, list[Unremovable]] = {pid: [] for pid in scopes}
    unremovable: dict[str, list[Unremovable]] = {pid: [] for pid in scopes}
    for verdicts, found in ((abandoned, {n: (r,) for n, r in out.abandoned.items()}),
                            (unremovable, out.unremovable)):
        for n, rs in sorted(found.items()):
            held, other = Unremovable(n, tuple(rs), True), Unremovable(n, tuple(rs), False)
            for pid in listed.get(n, ()):
                verdicts[pid].append(held if pid in sites[n].stakeholders else other)
    turns = {n: _turn(sites[n], waiting) for n in out.draining}
    plans = []
    for pid, scope in sorted(scopes.items(), key=lambda kv: kv[1].policy.name):
        def mine(names_: Iterable[str], pid: str = pid) -> tuple[str, ...]:
            return tuple(n for n in names_ if pid in listed.get(n, ()))
        if scope.pool not in in_use:
            in_use[scope.pool] = tuple(
                name for name in sorted(scope.nodes)
                if any(not (p.daemon or p.mirror) for p in cluster.nodes[name].pods))
        freeable = mine(out.freeable)
        draining = tuple(n for n in out.draining if pid in sites[n].movable)
        moved = {p.key for n in freeable for p in
                 (*sites[n].movable.get(pid, ()), *sites[n].riders)}
        plans.append(DrainPlan(
            pid, in_use[scope.pool], freeable, draining, mine(out.drained),
            tuple(abandoned[pid]), tuple(unremovable[pid]),
            {n: next_evictions(turns[n][1], scope.policy.descheduler)
             if turns[n][0] == pid else () for n in draining},
            {k: cluster.moves[k] for k in sorted(moved & position.keys(),
                                                 key=position.__getitem__)},
            {n: sites[n].evictions() for n in freeable}))
    return plans
