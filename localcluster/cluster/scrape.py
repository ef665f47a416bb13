"""Reading Prometheus' text format: a series' value, a sum over series, a histogram's buckets,
a quantile. Lines are parsed by ``prometheus_client``'s parser, so label values are unescaped
and a trailing timestamp is not mistaken for the value."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

Buckets = list[tuple[float, float]]  # (upper bound, cumulative count), ascending


def _samples(text: str, name: str) -> Iterator[Sample]:
    """The samples named exactly ``name``, in the order written. Only lines that may hold one
    reach the parser, which needs about half a second for a whole API server scrape. No
    comment line reaches it either, so a ``# TYPE x counter`` cannot have it rename ``x``'s
    samples ``x_total``."""
    lines = [line for line in text.split("\n") if line.lstrip().startswith((name, "{"))]
    for family in text_string_to_metric_families("\n".join(lines)):
        yield from (s for s in family.samples if s.name == name)


def series(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """Every sample named exactly ``name``: its labels and value."""
    return [(dict(s.labels), float(s.value)) for s in _samples(text, name)]


def _has(labels: Mapping[str, str], match: Mapping[str, str] | None) -> bool:
    return all(labels.get(k) == v for k, v in (match or {}).items())


def value(text: str, name: str, match: Mapping[str, str] | None = None) -> float:
    """The sum of ``name``'s samples whose labels include ``match``."""
    total = 0.0
    for s in _samples(text, name):
        if _has(s.labels, match):
            total += float(s.value)
    return total


def sample(text: str, name: str, labels: Mapping[str, str] | None = None) -> float:
    """The value of ``name``'s one series whose labels are exactly ``labels`` (none: the
    unlabelled series); 0 while that series is absent."""
    want = dict(labels or {})
    return next((float(s.value) for s in _samples(text, name) if s.labels == want), 0.0)


def histogram(text: str, name: str, match: Mapping[str, str] | None = None) -> Buckets:
    """``name``'s buckets summed over the label sets that include ``match``."""
    sums: dict[float, float] = {}
    for s in _samples(text, f"{name}_bucket"):
        if _has(s.labels, match):
            le = float(s.labels["le"])  # "+Inf" reads as inf
            sums[le] = sums.get(le, 0.0) + float(s.value)
    return sorted(sums.items())


def delta(after: Buckets, before: Buckets) -> Buckets:
    """What was observed between two readings; a counter reset (a restart) in between
    leaves only the second reading."""
    b = dict(before)
    if after and b and after[-1][1] < b.get(after[-1][0], 0.0):
        return after
    return [(le, c - b.get(le, 0.0)) for le, c in after]


def quantile(buckets: Buckets, q: float) -> float:
    """Linear interpolation inside the bucket, as Prometheus' histogram_quantile does; nan
    with no observations."""
    if not buckets or buckets[-1][1] == 0:
        return float("nan")
    rank, prev_le, prev_count = q * buckets[-1][1], 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * (rank - prev_count) / max(count - prev_count, 1e-9)
        prev_le, prev_count = le, count
    return prev_le
