"""Prometheus metrics of the webhook and of the compaction scheduler's extender, each process on
a registry of its own (base units, ``compactor_``)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

# How prometheus_client writes a bucket's bound ("0.0005", "1.0", "+Inf"); typed here.
_bound_text: Callable[[float], str] = floatToGoString

# Sub-millisecond resolution where the warm path lives, up to the admission budget.
LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.0075, 0.01,
    0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0,
)


class Tally:
    """One series of a ``TallyFamily``: a plain int, written by the event loop's thread alone
    and read there at scrape time (/metrics is served on the same loop)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def inc(self, amount: int = 1) -> None:
        self.value += amount


class TallyFamily(Collector):
    """A counter with one label, for the warm admission's path: prometheus_client's Counter
    takes a lock on every increment, and a warm admission counts four times."""

    def __init__(self, name: str, documentation: str, label: str,
                 registry: CollectorRegistry) -> None:
        self.name, self.documentation, self.label = name, documentation, label
        self._series: dict[str, Tally] = {}
        registry.register(self)

    def labels(self, value: str) -> Tally:
        found = self._series.get(value)
        if found is None:
            found = self._series[value] = Tally()
        return found

    def describe(self) -> Iterator[Metric]:
        yield CounterMetricFamily(self.name, self.documentation, labels=[self.label])

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=[self.label])
        for value, tally in self._series.items():
            family.add_metric([value], tally.value)
        yield family


class LatencyHistogram(Collector):
    """A histogram observed by the event loop's thread alone (as ``Tally``): one bisect and
    two additions per answer instead of Histogram's locked increments."""

    def __init__(self, name: str, documentation: str, buckets: Sequence[float],
                 registry: CollectorRegistry) -> None:
        self.name, self.documentation = name, documentation
        self._bounds = tuple(sorted(buckets))
        self._counts = [0] * (len(self._bounds) + 1)  # the last: above every bound
        self._sum = 0.0
        registry.register(self)

    def observe(self, seconds: float) -> None:
        self._counts[bisect_left(self._bounds, seconds)] += 1  # le: bound >= value
        self._sum += seconds

    def describe(self) -> Iterator[Metric]:
        yield HistogramMetricFamily(self.name, self.documentation)

    def collect(self) -> Iterator[Metric]:
        buckets, total = [], 0
        for bound, count in zip((*self._bounds, float("inf")), self._counts, strict=True):
            total += count
            buckets.append((_bound_text(bound), total))
        yield HistogramMetricFamily(self.name, self.documentation, buckets=buckets,
                                    sum_value=self._sum)


class WatchMetrics:
    """The metadata watches' series, which both processes follow (``webhook.feed``)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
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


class ExtenderMetrics(WatchMetrics):
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        r = self.registry
        self.extender = Counter(
            "compactor_extender_requests", "The compaction scheduler's extender calls, by "
            "outcome: planned (the Pod replaces a drained one and its planned node was a "
            "candidate, scored first), elsewhere (the planned node was no candidate), none (no "
            "departure to replace), malformed_args or too_large.", ["outcome"], registry=r)
        for outcome in ("planned", "elsewhere", "none", "malformed_args", "too_large"):
            self.extender.labels(outcome)


class Metrics(WatchMetrics):
    """The admission webhook's."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        r = self.registry
        self.duration = LatencyHistogram(
            "compactor_admission_duration_seconds", "Time to answer one AdmissionReview.",
            LATENCY_BUCKETS, r)
        self.requests = TallyFamily(
            "compactor_admission_requests", "AdmissionReviews answered, by outcome.",
            "outcome", r)
        self.failures = Counter(
            "compactor_admission_failed_open", "Admissions allowed unchanged because of a "
            "problem, by reason.", ["reason"], registry=r)
        self.rejected = Counter(
            "compactor_admission_rejected", "Requests answered with an HTTP error instead of a "
            "verdict (not an AdmissionReview, too large), by reason.", ["reason"], registry=r)
        self.lookups = TallyFamily(
            "compactor_owner_lookups", "Owner lookups, by result.", "result", r)
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
        self.certificate_expiry = Gauge(
            "compactor_webhook_certificate_expiration_timestamp_seconds", "When the serving "
            "certificate now loaded expires (notAfter, Unix time).", registry=r)
        for outcome in ("patched", "unchanged", "skipped", "failed_open", "rejected"):
            self.requests.labels(outcome)
        for result in ("hit", "miss", "negative", "error", "invalid"):
            self.lookups.labels(result)
        for reason in ("malformed_review", "too_large"):
            self.rejected.labels(reason)
        # Every outcome of webhook.patch.resource_patch, each series bound once (and so
        # exported at 0 from the start).
        self.resource_patch_outcomes = {o: self.resource_patches.labels(o) for o in (
            "applied", "unchanged", "conflict", "unpatchable", "limit_ranges_changed",
            "limit_ranges_unknown")}

    def track_cache(self, size: Callable[[], int]) -> None:
        self.cache_entries.set_function(lambda: float(size()))
