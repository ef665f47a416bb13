"""Prometheus metrics of the webhook, on a registry of its own (base units, ``compactor_``)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Sub-millisecond resolution where the warm path lives, up to the admission budget.
LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.0075, 0.01,
    0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0,
)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.duration = Histogram(
            "compactor_admission_duration_seconds", "Time to answer one AdmissionReview.",
            buckets=LATENCY_BUCKETS, registry=r)
        self.requests = Counter(
            "compactor_admission_requests", "AdmissionReviews answered, by outcome.",
            ["outcome"], registry=r)
        self.failures = Counter(
            "compactor_admission_failed_open", "Admissions allowed unchanged because of a "
            "problem, by reason.", ["reason"], registry=r)
        self.rejected = Counter(
            "compactor_admission_rejected", "Requests answered with an HTTP error instead of a "
            "verdict (not an AdmissionReview, too large), by reason.", ["reason"], registry=r)
        self.lookups = Counter(
            "compactor_owner_lookups", "Owner lookups, by result.", ["result"], registry=r)
        self.api_requests = Counter(
            "compactor_owner_api_requests", "GET requests sent to the API server.",
            registry=r)
        self.cache_entries = Gauge(
            "compactor_owner_cache_entries", "Owners held in the lookup cache.", registry=r)
        self.gpu_overrides = Counter(
            "compactor_gpu_scheduler_overrides", "Pods that kept a scheduler they already "
            "named (e.g. kai-scheduler) instead of the compaction scheduler.",
            ["scheduler"], registry=r)
        self.intent_errors = Counter(
            "compactor_intent_errors", "Workload intent or resource-plan annotations that "
            "could not be used.", ["reason"], registry=r)
        self.resource_patches = Counter(
            "compactor_resource_patches", "Pods of a workload with a resource plan, by what "
            "admission did with the plan (applied, unchanged; or why it was left out).",
            ["outcome"], registry=r)
        self.watch_objects = Gauge(
            "compactor_owner_watch_objects", "Owners held by the watch feed, by kind.",
            ["kind"], registry=r)
        self.watch_synced = Gauge(
            "compactor_owner_watch_synced", "1 while the kind's watch is running and its "
            "lookups need no API call.", ["kind"], registry=r)
        self.watch_served = Gauge(
            "compactor_owner_watch_served", "1 while the API server serves the kind (0: its "
            "CRD is not installed, so its watch is not synced by design).", ["kind"],
            registry=r)
        self.watch_restarts = Counter(
            "compactor_owner_watch_restarts", "Watch restarts, by kind and reason (expired: "
            "relisted after 410 Gone; error: reconnected after a failure).",
            ["kind", "reason"], registry=r)
        self.certificate_expiry = Gauge(
            "compactor_webhook_certificate_expiration_timestamp_seconds", "When the serving "
            "certificate now loaded expires (notAfter, Unix time).", registry=r)
        for outcome in ("patched", "unchanged", "skipped", "failed_open", "rejected"):
            self.requests.labels(outcome)
        for result in ("hit", "miss", "negative", "error", "invalid"):
            self.lookups.labels(result)
        for reason in ("malformed_review", "too_large"):
            self.rejected.labels(reason)
        for outcome in ("applied", "unchanged", "conflict", "unpatchable",
                        "limit_ranges_changed", "limit_ranges_unknown"):
            self.resource_patches.labels(outcome)

    def track_cache(self, size: Callable[[], int]) -> None:
        self.cache_entries.set_function(lambda: float(size()))
