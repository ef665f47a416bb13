"""What ``scrape`` reads out of Prometheus' text format: sample names as written (a counter
typed without ``_total`` included), unescaped label values, histogram buckets up to +Inf, NaN,
values ahead of timestamps, and comments that count for nothing."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from localcluster.cluster import scrape

INF = float("inf")

TEXT = r"""# HELP compactor_evictions_total Pods evicted 99 times.
# TYPE compactor_evictions_total counter
compactor_evictions_total{node="a",reason="drain"} 3
compactor_evictions_total{node="b",reason="drain"} 4
compactor_evictions_total{node="b",reason="idle"} 1
# HELP apiserver_admission_webhook_fail_open_count Calls that failed open.
# TYPE apiserver_admission_webhook_fail_open_count counter
apiserver_admission_webhook_fail_open_count{name="w",type="admit"} 2
apiserver_admission_webhook_fail_open_count{name="x",type="admit"} 5
# HELP compactor_plan_duration_seconds Time to plan a pool.
# TYPE compactor_plan_duration_seconds histogram
compactor_plan_duration_seconds_bucket{pool="p",le="0.1"} 4
compactor_plan_duration_seconds_bucket{pool="p",le="1.0"} 9
compactor_plan_duration_seconds_bucket{pool="p",le="+Inf"} 10
compactor_plan_duration_seconds_sum{pool="p"} 3.5
compactor_plan_duration_seconds_count{pool="p"} 10
compactor_plan_duration_seconds_bucket{pool="q",le="0.1"} 1
compactor_plan_duration_seconds_bucket{pool="q",le="1.0"} 1
compactor_plan_duration_seconds_bucket{pool="q",le="+Inf"} 2
compactor_plan_duration_seconds_sum{pool="q"} 7.25
compactor_plan_duration_seconds_count{pool="q"} 2
# TYPE compactor_savings_ratio gauge
compactor_savings_ratio NaN
compactor_headroom{side="up"} +Inf
compactor_headroom{side="down"} -Inf
# a free comment: compactor_up 42
compactor_up 1 1700000000000
compactor_owner{kind="a\"b",path="C:\\tmp",note="x\ny"} 5
compactor_owner{kind="x\",y",path="",note=""} 6
"""

Read = Callable[[str], object]

CASES: list[tuple[str, Read, object]] = [
    ("counter summed over all series",
     lambda t: scrape.value(t, "compactor_evictions_total"), 8.0),
    ("counter summed over the series that include the labels",
     lambda t: scrape.value(t, "compactor_evictions_total", {"node": "b"}), 5.0),
    ("counter with every label given",
     lambda t: scrape.value(t, "compactor_evictions_total", {"node": "b", "reason": "idle"}),
     1.0),
    ("no series with the labels",
     lambda t: scrape.value(t, "compactor_evictions_total", {"node": "c"}), 0.0),
    ("the parser's family name is no sample name",
     lambda t: scrape.value(t, "compactor_evictions"), 0.0),
    ("counter typed without _total keeps its name",
     lambda t: scrape.value(t, "apiserver_admission_webhook_fail_open_count"), 7.0),
    ("counter typed without _total gains no _total",
     lambda t: scrape.value(t, "apiserver_admission_webhook_fail_open_count_total"), 0.0),
    ("one series of a counter typed without _total",
     lambda t: scrape.sample(t, "apiserver_admission_webhook_fail_open_count",
                             {"name": "x", "type": "admit"}), 5.0),
    ("a sample needs exactly the labels",
     lambda t: scrape.sample(t, "compactor_evictions_total", {"node": "a"}), 0.0),
    ("a sample with exactly the labels",
     lambda t: scrape.sample(t, "compactor_evictions_total", {"node": "a", "reason": "drain"}),
     3.0),
    ("an absent sample",
     lambda t: scrape.sample(t, "compactor_absent"), 0.0),
    ("histogram _sum summed",
     lambda t: scrape.value(t, "compactor_plan_duration_seconds_sum"), 10.75),
    ("histogram _count of one label set",
     lambda t: scrape.sample(t, "compactor_plan_duration_seconds_count", {"pool": "q"}), 2.0),
    ("histogram name alone has no samples",
     lambda t: scrape.value(t, "compactor_plan_duration_seconds"), 0.0),
    ("histogram buckets summed over label sets",
     lambda t: scrape.histogram(t, "compactor_plan_duration_seconds"),
     [(0.1, 5.0), (1.0, 10.0), (INF, 12.0)]),
    ("histogram buckets of the label sets asked",
     lambda t: scrape.histogram(t, "compactor_plan_duration_seconds", {"pool": "p"}),
     [(0.1, 4.0), (1.0, 9.0), (INF, 10.0)]),
    ("histogram of a name prefix",
     lambda t: scrape.histogram(t, "compactor_plan"), []),
    ("gauge NaN",
     lambda t: scrape.sample(t, "compactor_savings_ratio"), math.nan),
    ("gauge +Inf",
     lambda t: scrape.sample(t, "compactor_headroom", {"side": "up"}), INF),
    ("gauge -Inf",
     lambda t: scrape.sample(t, "compactor_headroom", {"side": "down"}), -INF),
    ("the value, not the timestamp, and not a comment",
     lambda t: scrape.value(t, "compactor_up"), 1.0),
    ("escaped quote, backslash and newline in label values",
     lambda t: scrape.sample(t, "compactor_owner",
                             {"kind": 'a"b', "path": "C:\\tmp", "note": "x\ny"}), 5.0),
    ('an escaped quote followed by a comma in a label value',
     lambda t: scrape.value(t, "compactor_owner", {"kind": 'x",y'}), 6.0),
]


def _same(got: object, want: object) -> bool:
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    return type(got) is type(want) and got == want


@pytest.mark.parametrize(("read", "want"), [(r, w) for _, r, w in CASES],
                         ids=[name for name, _, _ in CASES])
def test_the_exposition_text_reads_as_written(read: Read, want: object) -> None:
    got = read(TEXT)
    assert _same(got, want), got


def test_buckets_read_back_give_the_quantile() -> None:
    buckets = scrape.histogram(TEXT, "compactor_plan_duration_seconds", {"pool": "p"})
    assert scrape.quantile(buckets, 0.5) == pytest.approx(0.1 + 0.9 * (5 - 4) / (9 - 4))
    assert scrape.quantile(buckets, 0.99) == 1.0


def test_a_line_of_another_metric_that_does_not_parse_is_no_obstacle() -> None:
    text = 'other_metric{broken 1\ncompactor_up{zone="a"} 3\n'
    assert scrape.value(text, "compactor_up") == 3.0
    assert scrape.sample(text, "compactor_up", {"zone": "a"}) == 3.0


def test_a_line_of_the_metric_asked_that_does_not_parse_is_an_error() -> None:
    with pytest.raises(ValueError):
        scrape.value('compactor_up{zone="a"} three\n', "compactor_up")
