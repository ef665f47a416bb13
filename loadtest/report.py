"""What `make bench` leaves behind: one row per scenario, as CSV, as Markdown with the
PASS/FAIL lines (also printed) and as a plot of client-side latency."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

Check = tuple[str, bool, str]  # (target, met, what was measured)
# Median warm/baseline ratio, its lowest and highest, and each interleaved pair's.
Ratio = tuple[float, float, float, list[float]]


@dataclass
class Row:
    name: str
    rps: float
    p50: float
    p95: float
    p99: float
    server_p50: float
    server_p95: float
    server_p99: float
    cpu_per_1000: float
    peak_rss_mib: float
    failures: int
    requests: int
    gets: str = ""


def write(results: Path, rows: list[Row], checks: list[Check], ratio: Ratio,
          creation_rates: dict[str, list[float]]) -> None:
    """bench.csv, bench.md (printed too) and latency.png in ``results``."""
    head = ["scenario", "req/s", "p50 ms", "p95 ms", "p99 ms", "server p50 ms",
            "server p95 ms", "server p99 ms", "CPU s / 1000", "peak RSS MiB", "failures",
            "requests", "owner GETs"]
    cells = [[r.name, f"{r.rps:.0f}", f"{r.p50:.1f}", f"{r.p95:.1f}", f"{r.p99:.1f}",
              f"{r.server_p50:.3f}", f"{r.server_p95:.3f}", f"{r.server_p99:.3f}",
              f"{r.cpu_per_1000:.2f}", f"{r.peak_rss_mib:.0f}", str(r.failures),
              str(r.requests), r.gets] for r in rows]
    with open(results / "bench.csv", "w", newline="") as f:
        csv.writer(f).writerows([head, *cells])
    md = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    md += ["| " + " | ".join(r) + " |" for r in cells]
    md += ["", f"warm/baseline per interleaved pair: "
           f"{', '.join(f'{r:.2f}' for r in ratio[3])} (median {ratio[0]:.2f}, "
           f"spread {ratio[1]:.2f}–{ratio[2]:.2f}); "
           + "; ".join(f"Pods/s {v} the webhook per run: "
                       + ", ".join(f"{x:.0f}" for x in rates)
                       for v, rates in creation_rates.items())]
    md += ["", *(f"{'PASS' if ok else 'FAIL'}: {name} ({detail})"
                 for name, ok, detail in checks)]
    (results / "bench.md").write_text("\n".join(md) + "\n")
    print("\n" + "\n".join(md))
    plot(rows, results / "latency.png")


def plot(rows: list[Row], file: Path) -> None:
    """Client-side p50, p95 and p99 of the scenarios locust measured (the others have none)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    measured = [r for r in rows if r.p99 == r.p99]
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.25
    for i, (label, attr) in enumerate((("p50", "p50"), ("p95", "p95"), ("p99", "p99"))):
        ax.bar([x + (i - 1) * width for x in range(len(measured))],
               [getattr(r, attr) for r in measured], width, label=f"client {label}")
    ax.set_xticks(range(len(measured)), [r.name for r in measured])
    ax.set_ylabel("latency (ms)")
    ax.set_title("Admission latency, client side (locust)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(file, dpi=100)
    plt.close(fig)
