"""The targets `make bench` judges its measurements against: each a PASS or FAIL line of the
report, with what was measured."""

from __future__ import annotations

import statistics

from loadtest import report
from loadtest.report import Row


def spread(values: list[float]) -> tuple[float, float, float]:
    """Median, lowest and highest."""
    return statistics.median(values), min(values), max(values)


def ratio(ratios: list[float]) -> report.Ratio:
    """The warm/baseline ratios of the interleaved pairs: their median, lowest and highest,
    and each pair's."""
    median, low, high = spread(ratios)
    return median, low, high, ratios


def checks(ratio: report.Ratio, paced: Row, burst: tuple[int, int], cache_mib: float,
           feed_mib: float, rows: list[Row], through: bool, concurrent: bool
           ) -> list[report.Check]:
    """Every target met or not: ``burst`` is the cold burst's owner GETs and the most it
    should make, ``rows`` every scenario's, ``through`` and ``concurrent`` whether the Pods
    created through the API server were all admitted as they should be."""
    median, low, high, ratios = ratio
    return [
        ("median warm throughput >= 0.85 x baseline over interleaved pairs", median >= 0.85,
         f"median {median:.2f}x, spread {low:.2f}–{high:.2f}x over {len(ratios)} pairs: "
         + ", ".join(f"{r:.2f}" for r in ratios)),
        ("warm server-side p99 < 2 ms at half the warm median rate",
         paced.server_p99 < 2.0, f"{paced.server_p99:.2f} ms at {paced.rps:.0f} req/s"),
        ("cold burst: at most one GET per distinct owner", burst[0] <= burst[1],
         f"{burst[0]} GETs for {burst[1]} owners (namespace included)"),
        ("RSS < 150 MiB with 100,000 cached owners", cache_mib < 150, f"{cache_mib:.0f} MiB"),
        ("RSS < 150 MiB with 100,000 owners in the watch feed", feed_mib < 150,
         f"{feed_mib:.0f} MiB"),
        ("zero failed requests", all(r.failures == 0 for r in rows) and through
         and concurrent, ", ".join(f"{r.name}: {r.failures}" for r in rows)),
    ]
