"""Reading Prometheus' text format: a series' value, a sum over series, a histogram's buckets,
a quantile."""

from __future__ import annotations

from collections.abc import Mapping

Buckets = list[tuple[float, float]]  # (upper bound, cumulative count), ascending


def _labels(line: str) -> dict[str, str]:
    if "{" not in line:
        return {}
    inner = line.split("{", 1)[1].rsplit("}", 1)[0]
    out = {}
    for part in inner.split('",'):
        if "=" in part:
            key, value = part.split("=", 1)
            out[key.strip()] = value.strip().strip('"')
    return out


def value(text: str, name: str, match: Mapping[str, str] | None = None) -> float:
    """The sum of ``name``'s samples whose labels include ``match``."""
    total = 0.0
    for line in text.splitlines():
        if (line.startswith(name + "{") or line.startswith(name + " ")) and all(
                _labels(line).get(k) == v for k, v in (match or {}).items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def sample(text: str, name: str, labels: Mapping[str, str] | None = None) -> float:
    """The value of ``name``'s one series whose labels are exactly ``labels`` (none: the
    unlabelled series); 0 while that series is absent."""
    want = dict(labels or {})
    for line in text.splitlines():
        if (line.startswith(name + "{") or line.startswith(name + " ")) and _labels(line) == want:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def histogram(text: str, name: str, match: Mapping[str, str] | None = None) -> Buckets:
    """``name``'s buckets summed over the label sets that include ``match``."""
    sums: dict[float, float] = {}
    for line in text.splitlines():
        if not line.startswith(f"{name}_bucket{{"):
            continue
        labels = _labels(line)
        if all(labels.get(k) == v for k, v in (match or {}).items()):
            le = labels["le"]
            key = float("inf") if le == "+Inf" else float(le)
            sums[key] = sums.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
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
