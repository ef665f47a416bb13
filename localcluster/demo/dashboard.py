"""Compactor's Grafana dashboard read as data: its panels' PromQL, run against a real
Prometheus, and drawn to a PNG the way Grafana would lay it out, without a Grafana server."""

from __future__ import annotations

import datetime
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcluster.cluster.control_plane import ROOT
from localcluster.cluster.prometheus import Prometheus, Series

DASHBOARD = ROOT / "deploy" / "grafana" / "compactor.json"
_LEGEND = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@dataclass(frozen=True)
class Query:
    ref: str
    expr: str
    legend: str


@dataclass(frozen=True)
class Panel:
    title: str
    type: str
    unit: str
    queries: tuple[Query, ...]
    grid: tuple[int, int, int, int]  # x, y, w, h in Grafana's 24-column grid


def load(file: Path = DASHBOARD) -> dict[str, Any]:
    model: dict[str, Any] = json.loads(file.read_text())
    return model


def panels(model: dict[str, Any]) -> list[Panel]:
    """Every panel with queries, rows' nested panels included, in layout order."""
    flat: list[dict[str, Any]] = []
    for p in model.get("panels", []):
        flat.append(p)
        flat.extend(p.get("panels", []))
    out = []
    for p in flat:
        targets = p.get("targets") or []
        if not targets:
            continue
        grid = p.get("gridPos", {})
        unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
        out.append(Panel(p["title"], p["type"], unit,
                         tuple(Query(t["refId"], t["expr"], t.get("legendFormat", ""))
                               for t in targets),
                         (grid.get("x", 0), grid.get("y", 0), grid.get("w", 12),
                          grid.get("h", 8))))
    return sorted(out, key=lambda p: (p.grid[1], p.grid[0]))


def promql(expr: str, rate_interval: str = "1m", interval: str = "15s") -> str:
    """The query Prometheus receives once Grafana has filled in its interval variables."""
    for name, value in (("__rate_interval", rate_interval), ("__interval", interval),
                        ("__range", rate_interval)):
        expr = expr.replace("${" + name + "}", value).replace("$" + name, value)
    return expr


def legend(fmt: str, labels: dict[str, str]) -> str:
    if fmt:
        return _LEGEND.sub(lambda m: labels.get(m.group(1), ""), fmt)
    shown = {k: v for k, v in labels.items() if k not in ("__name__", "job", "instance")}
    return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(shown.items())) + "}"


def fetch(prom: Prometheus, panel: Panel, start: float, end: float, step: float,
          rate_interval: str = "1m") -> list[tuple[str, Series]]:
    """The panel's series over [start, end], each with its legend. The steps are counted
    back from ``end``, so the latest samples are always drawn."""
    start = end - math.floor((end - start) / step) * step
    out = []
    for q in panel.queries:
        for s in prom.query_range(promql(q.expr, rate_interval), start, end, step):
            out.append((legend(q.legend, s.labels), s))
    return out


def _value(v: float, unit: str) -> str:
    if math.isnan(v):
        return "no data"
    if unit == "s":
        if abs(v) >= 86400:
            return f"{v / 86400:.1f} days"
        if abs(v) >= 1:
            return f"{v:.2f} s"
        return f"{v * 1000:.2f} ms"
    return f"{v:g}"


def render(prom: Prometheus, model: dict[str, Any], out: Path, start: float, end: float,
           step: float = 5.0, rate_interval: str = "1m") -> dict[str, int]:
    """Draws every panel's series to ``out`` (PNG); returns the series count per panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    items = panels(model)
    width = 3
    rows = math.ceil(len(items) / width)
    fig, axes = plt.subplots(rows, width, figsize=(6 * width, 3.1 * rows), squeeze=False)
    counts: dict[str, int] = {}
    for ax, panel in zip(axes.flat, items, strict=False):
        series = fetch(prom, panel, start, end, step, rate_interval)
        counts[panel.title] = len(series)
        ax.set_title(panel.title, fontsize=10, loc="left")
        if panel.type == "stat":
            text = "\n".join(f"{_value(s.points[-1][1], panel.unit)}  ({name})"
                             for name, s in series if s.points) or "no data"
            ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=14,
                    transform=ax.transAxes)
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        for name, s in series:
            xs = [datetime.datetime.fromtimestamp(t, datetime.UTC) for t, _ in s.points]
            ax.plot(xs, [v for _, v in s.points], label=name, linewidth=1.2)
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))  # type: ignore[no-untyped-call]
        ax.tick_params(labelsize=7)
        if panel.unit in ("s", "reqps", "ops"):
            ax.set_ylabel({"s": "seconds", "reqps": "per second", "ops": "per second"}[
                panel.unit], fontsize=7)
        if series:
            ax.legend(fontsize=6, loc="upper left", ncol=2)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(items):]:
        ax.axis("off")
    span = datetime.datetime.fromtimestamp(start, datetime.UTC).strftime("%Y-%m-%d %H:%M")
    fig.suptitle(f"{model.get('title', 'dashboard')}: {len(items)} panels, from {span} UTC, "
                 f"{(end - start) / 60:.0f} minutes", fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return counts
