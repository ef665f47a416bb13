"""The webhook's lock-free counters and latency histogram expose exactly what prometheus_client's
own Counter and Histogram would for the same observations (the reference they replace on the
warm admission's path)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from webhook.metrics import LATENCY_BUCKETS, LatencyHistogram, Metrics, TallyFamily


def _samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample but prometheus_client's ``_created`` timestamps."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in registry.collect() for s in family.samples
            if not s.name.endswith("_created")}


# Bounds themselves, values just around them, and anything up to far past the last bound.
_seconds = st.one_of(st.sampled_from(LATENCY_BUCKETS),
                     st.floats(min_value=0.0, max_value=20.0, allow_nan=False),
                     st.sampled_from(LATENCY_BUCKETS).map(lambda b: b * (1 + 1e-12)))


@given(st.lists(_seconds, max_size=60))
def test_histogram_matches_prometheus_client(observations: list[float]) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    fast = LatencyHistogram("t_seconds", "h", LATENCY_BUCKETS, ours)
    reference = Histogram("t_seconds", "h", buckets=LATENCY_BUCKETS, registry=theirs)
    for value in observations:
        fast.observe(value)
        reference.observe(value)
    assert _samples(ours) == _samples(theirs)
    assert generate_latest(ours).decode().count("_bucket{") == len(LATENCY_BUCKETS) + 1


@given(st.lists(st.sampled_from(["hit", "miss", "negative", "error"]), max_size=40))
def test_tallies_match_prometheus_client(results: list[str]) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    fast = TallyFamily("t_lookups", "c", "result", ours)
    reference = Counter("t_lookups", "c", ["result"], registry=theirs)
    for result in ("hit", "miss"):  # declared up front, as Metrics does: exported at 0
        fast.labels(result)
        reference.labels(result)
    for result in results:
        fast.labels(result).inc()
        reference.labels(result).inc()
    assert _samples(ours) == _samples(theirs)


def test_metrics_registry_reads_the_tallies() -> None:
    metrics = Metrics()
    metrics.requests.labels("patched").inc()
    metrics.lookups.labels("hit").inc(3)
    registry = metrics.registry
    assert registry.get_sample_value("compactor_admission_requests_total",
                                     {"outcome": "patched"}) == 1
    assert registry.get_sample_value("compactor_admission_requests_total",
                                     {"outcome": "skipped"}) == 0
    assert registry.get_sample_value("compactor_owner_lookups_total", {"result": "hit"}) == 3
    assert registry.get_sample_value("compactor_admission_duration_seconds_count") == 0
