"""Prometheus metrics of the controller (``compactor_`` prefix, base units)."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Mapping
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from compaction.resource_plan import BlockReason
from controller.drain_planner.drain_plan import DrainPlan
from controller.drain_planner.reasons import Code
from controller.plan.landings import Outcome
from controller.plan.scheduler_routing import Routing

HELD: Final = (Code.EVICTION_BUDGET.value, Code.RECENTLY_REPLACED.value)


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.evictions = Counter(
            "compactor_runtime_evictions", "Runtime-hook replacements, by result.", ["result"],
            registry=r)
        self.suppressions = Counter(
            "compactor_suppressions", "Workloads suppressed after an admission loop.",
            registry=r)
        self.suppressed = Gauge(
            "compactor_suppressed_workloads", "Workloads currently suppressed.", registry=r)
        self.passes = Histogram(
            "compactor_reconcile_duration_seconds", "Time of one full reconcile pass.",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60), registry=r)
        self.errors = Counter(
            "compactor_reconcile_errors", "Writes that failed during a pass.", registry=r)
        self.api_requests = Gauge(
            "compactor_controller_api_requests", "Requests the controller has sent to the API "
            "server since it started.", registry=r)
        self.resource_plans_blocked = Counter(
            "compactor_resource_plans_blocked", "Workloads whose resource plan was found "
            "blocked (a request above its limit, an extended resource's request not its "
            "limit, a LimitRange it would break), by reason; counted with each "
            "ResourcesBlocked Event.", ["reason"], registry=r)
        self.api_watches = Gauge(
            "compactor_controller_api_watches", "Watches the controller has opened since it "
            "started (counted in compactor_controller_api_requests too): each watch cache "
            "renews its own every 5 to 10 minutes, whatever the cluster's size.", registry=r)
        self.api_throttled = Gauge(
            "compactor_controller_api_throttled", "Requests the API server answered with 429 "
            "Too Many Requests since the controller started; each was sent again after its "
            "Retry-After.", registry=r)
        self.api_cache_behind = Gauge(
            "compactor_controller_api_cache_behind", "List pages the API server answered with "
            "'Too large resource version' since the controller started (its watch cache behind "
            "the list); each was sent again, and a list still behind started over.", registry=r)
        self.informed_objects = Gauge(
            "compactor_controller_informed_objects", "Objects held by the controller's watch "
            "caches (every kind a pass reads).", registry=r)
        self.plan_duration = Histogram(
            "compactor_plan_duration_seconds", "Time to compute one pass's plan (pure code: "
            "the drain simulation included).",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5), registry=r)
        self.phases = Histogram(
            "compactor_reconcile_phase_duration_seconds", "Time of one pass's phase: read "
            "(the snapshot from the watch caches), plan (pure code) or write (the plan's "
            "requests).", ["phase"],
            buckets=(0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60), registry=r)
        for phase in ("read", "plan", "write"):
            self.phases.labels(phase)
        self.in_use = Gauge(
            "compactor_plan_nodes_in_use", "Nodes of the policy's pool running a Pod other "
            "than a DaemonSet's or a mirror Pod.", ["policy"], registry=r)
        self.freeable = Gauge(
            "compactor_plan_freeable_nodes", "Nodes the policy's plan could free now.",
            ["policy"], registry=r)
        self.draining = Gauge(
            "compactor_nodes_draining", "Nodes tainted by the policy's plan and draining.",
            ["policy"], registry=r)
        self.unremovable = Gauge(
            "compactor_nodes_unremovable", "Nodes of the policy's pool that cannot be freed, "
            "by their first reason.", ["policy", "reason"], registry=r)
        self.scheduler_routing = Gauge(
            "compactor_scheduler_routing", "1 for where new Pods of managed-scheduler policies "
            "go now, by the SchedulerReady reason: Available or Starting (to "
            "compactor-scheduler), Unavailable or Recovering (to the default scheduler).",
            ["state"], registry=r)
        self.stranded = Counter(
            "compactor_stranded_pods_replaced", "Pods left Pending on a compaction scheduler "
            "with no available replica, replaced through the Eviction API so that their owners "
            "recreate them for the default scheduler.", registry=r)
        self.landings = Counter(
            "compactor_drain_landings", "Replacements of Pods the drains evicted, by where "
            "they landed against the plan: planned_node, kept_node (another node the plan "
            "keeps) or free_node (a node the plan counted as free: an eviction for nothing).",
            ["outcome"], registry=r)
        for outcome in Outcome:
            self.landings.labels(outcome.value)
        self.held = Gauge(
            "compactor_pods_held_from_eviction", "Pods of managed workloads Compactor may not "
            "evict now, by reason: eviction_budget (their workload's eviction budget is spent "
            "or invalid) or recently_replaced (they replaced a Pod Compactor evicted less than "
            "evictReplacementsAfter ago).", ["reason"], registry=r)
        for code in HELD:
            self.held.labels(code)
        self.leader = Gauge(
            "compactor_controller_leader", "1 while this replica holds the controller's Lease "
            "(the one replica that writes), else 0.", registry=r)
        for result in ("evicted", "pdb_blocked", "skipped"):
            self.evictions.labels(result)
        for reason in BlockReason:
            self.resource_plans_blocked.labels(reason.value)
        for state in Routing:
            self.scheduler_routing.labels(state.value)

    def show_held(self, held: Mapping[str, int]) -> None:
        for code in HELD:
            self.held.labels(code).set(held.get(code, 0))

    def show_routing(self, state: str) -> None:
        for each in Routing:
            self.scheduler_routing.labels(each.value).set(1 if each.value == state else 0)

    def show_plans(self, drains: Iterable[DrainPlan]) -> None:
        """The planner's gauges, as of this pass (a policy gone leaves no series)."""
        for gauge in (self.in_use, self.freeable, self.draining, self.unremovable):
            gauge.clear()
        for d in drains:
            self.in_use.labels(d.policy).set(len(d.nodes_in_use))
            self.freeable.labels(d.policy).set(len(d.freeable))
            self.draining.labels(d.policy).set(len(d.draining))
            counts = Tally(u.reasons[0].code for u in (*d.abandoned, *d.unremovable)
                             if u.reasons)
            for code, count in counts.items():
                self.unremovable.labels(d.policy, code).set(count)
