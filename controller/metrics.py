"""Prometheus metrics of the controller (``compactor_`` prefix, base units)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


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
        self.informed_objects = Gauge(
            "compactor_controller_informed_objects", "Pods, ReplicaSets and Jobs held by the "
            "controller's watch caches.", registry=r)
        for result in ("evicted", "pdb_blocked", "skipped"):
            self.evictions.labels(result)
