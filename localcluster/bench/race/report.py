"""The race's tables from its records (pure): one row per run, grouped by seed, then each arm
against a reference arm paired by seed, with the sign-flip test's p-value."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from localcluster.bench.race.arms import THRESHOLD
from localcluster.bench.race.stats import describe, paired

Record = dict[str, Any]  # a RunRecord as its JSON line holds it


def _per_removed(r: Record) -> float | None:
    m = r["metrics"]
    net = m["in_use_before"] - m["in_use_after"]
    return sum(m["evictions"].values()) / net if net > 0 else None


# A figure may be undefined for a run (None): that seed's pair is left out.
FIGURES: dict[str, Callable[[Record], float | None]] = {
    "node-hours": lambda r: r["metrics"]["node_hours"],
    "dollars": lambda r: r["metrics"]["dollars"],
    "evictions": lambda r: sum(r["metrics"]["evictions"].values()),
    "evictions per net node removed": _per_removed,
}


def load(lines: Sequence[str]) -> list[Record]:
    """The records of a ``race.jsonl``; a run recorded twice under one condition, seed and arm
    (an arm run again) keeps its last line, the one every table and pair then reads."""
    last: dict[tuple[Condition, int, str], Record] = {}
    for line in lines:
        if line.strip():
            r = json.loads(line)
            last.pop(key := (condition(r), r["seed"], r["arm"]), None)
            last[key] = r
    return list(last.values())


def tables(records: Sequence[Record]) -> str:
    """Every table of ``race.md``: the runs, each figure per seed and arm, each arm paired
    against ``karpenter`` and against ``control``, and the day cycles where a run had any."""
    parts = [per_seed(records), *(matrix(records, f) for f in FIGURES),
             paired_table(records, "karpenter"), paired_table(records, "control")]
    if any(r.get("cycles") for r in records):
        parts.append(cycles_table(records))
    return "\n\n".join(parts)


def _t(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def _flags(m: Record) -> str:
    out = []
    if m["cut"]:
        out.append("cut")
    if m["karpenter_timeouts"]:
        out.append(f"{m['karpenter_timeouts']} timeouts")
    if m["karpenter_failed_validations"]:
        out.append(f"{m['karpenter_failed_validations']} failed validations")
    return ", ".join(out) or "-"


def per_seed(records: Sequence[Record]) -> str:
    head = ("| nodes | catalogue | seed | order | arm | node-hours | $ | nodes start → end "
            "(NodeClaims) | in use before → after (net removed) | t50 / t90 s | evictions "
            "by actor | evicted again | protected moved | PDBs violated | worst unavailable "
            "| longest Pending s | launched (cause) | flags | load before / after |\n"
            + "|---" * 19 + "|")
    rows = [head]
    for r in sorted(records, key=lambda r: (condition(r), r["seed"], r["order"])):
        m = r["metrics"]
        worst = max(m["max_unavailable"].items(), key=lambda kv: kv[1], default=("-", 0))
        actors = ", ".join(f"{k} {v}" for k, v in sorted(m["evictions"].items())) or "0"
        causes = ", ".join(f"{k} {v}" for k, v in sorted(m["launched_by_cause"].items()))
        rows.append(
            f"| {r['nodes']} | {r['catalogue']} | {r['seed']} | {r['order']} | {r['arm']} | "
            f"{m['node_hours']:.3f} | {m['dollars']:.3f} | {m['nodes_start']} → "
            f"{m['nodes_end']} ({m['claims_end']}) | {m['in_use_before']} → "
            f"{m['in_use_after']} ({m['in_use_before'] - m['in_use_after']}) | "
            f"{_t(m['t50'])} / {_t(m['t90'])} | {actors} | {m['evicted_again']} | "
            f"{m['protected_moved']} | {m['pdb_violations']} | {worst[1]} ({worst[0]}) | "
            f"{m['pending_max']:.0f} | {m['launched']}{f' ({causes})' if causes else ''} | "
            f"{_flags(m)} | {r['load_before']:.1f} / {r['load_after']:.1f} |")
    return "\n".join(rows)


Condition = tuple[int, str, str, float, int, int]


def condition(r: Record) -> Condition:
    """What two runs must share to be compared: size, catalogue, contract variant, horizon,
    day cycles and thresholds (records written before they were settable ran at the default)."""
    return (r["nodes"], r["catalogue"], r["variant"], r["horizon"], len(r.get("cycles") or ()),
            r.get("threshold", THRESHOLD))


def pairs(records: Sequence[Record], arm: str, reference: str, figure: str
          ) -> tuple[list[float], list[float]]:
    """The figure of ``arm`` and ``reference`` on every seed that ran both under the same
    ``condition``."""
    by: dict[tuple[Condition, int], dict[str, Record]] = defaultdict(dict)
    for r in records:
        by[(condition(r), r["seed"])][r["arm"]] = r
    get = FIGURES[figure]
    a, b = [], []
    for _, arms in sorted(by.items()):
        if arm in arms and reference in arms:
            x, y = get(arms[arm]), get(arms[reference])
            if x is not None and y is not None:
                a.append(x)
                b.append(y)
    return a, b


def label(cond: Condition) -> str:
    """A condition in words, the caption of its tables."""
    nodes, catalogue, variant, horizon, cycles, threshold = cond
    text = f"{nodes} nodes, {catalogue}, {variant}, {horizon:.0f} s, thresholds {threshold} %"
    return text + (f", {cycles} day cycles" if cycles else "")


def _by_condition(records: Sequence[Record]) -> list[tuple[Condition, list[Record]]]:
    return [(cond, [r for r in records if condition(r) == cond])
            for cond in sorted({condition(r) for r in records})]


def paired_table(records: Sequence[Record], reference: str) -> str:
    """Each arm against ``reference``, one table per condition where it ran beside another
    arm: the median of the paired differences (arm − reference), the exact sign-flip
    p-value, and a bootstrap interval from 10 pairs up."""
    out = []
    for cond, mine in _by_condition(records):
        arms = sorted({r["arm"] for r in mine} - {reference})
        if not arms or not any(r["arm"] == reference for r in mine):
            continue
        rows = [f"**{label(cond)}**", "",
                f"| arm − {reference} | " + " | ".join(FIGURES) + f" | node-hours ÷ {reference} |",
                "|---" * (len(FIGURES) + 2) + "|"]
        for arm in arms:
            of = {f: pairs(mine, arm, reference, f) for f in FIGURES}
            cells = [describe(paired(*of[f])) for f in FIGURES] + [relative(*of["node-hours"])]
            rows.append(f"| {arm} | " + " | ".join(cells) + " |")
        out.append("\n".join(rows))
    return "\n\n".join(out)


def relative(a: Sequence[float], b: Sequence[float]) -> str:
    """The paired ratios a ÷ b − 1 as a median and a range, in percent: how far an arm's
    node-hours are from the reference's on each seed (the goal's "within 3 %")."""
    ratios = sorted(x / y - 1 for x, y in zip(a, b, strict=True) if y > 0)
    if not ratios:
        return "no pair"
    return (f"{statistics.median(ratios):+.1%} ({ratios[0]:+.1%} to {ratios[-1]:+.1%}, "
            f"n = {len(ratios)})")


def matrix(records: Sequence[Record], figure: str) -> str:
    """One figure per seed (rows) and arm (columns), one table per condition: the per-seed
    table at a glance; "-" where the arm did not run on the seed or the figure is undefined."""
    get = FIGURES[figure]
    out = []
    for cond, mine in _by_condition(records):
        arms = sorted({r["arm"] for r in mine})
        cell = {(r["seed"], r["arm"]): get(r) for r in mine}
        rows = [f"**{label(cond)}**", "",
                f"| {figure}: seed | " + " | ".join(arms) + " |", "|---" * (len(arms) + 1) + "|"]
        for seed in sorted({r["seed"] for r in mine}):
            values = [cell.get((seed, a)) for a in arms]
            rows.append(f"| {seed} | " + " | ".join("-" if v is None else f"{v:.3g}"
                                                     for v in values) + " |")
        out.append("\n".join(rows))
    return "\n\n".join(out)


def cycles_table(records: Sequence[Record]) -> str:
    """Node-hours and evictions per day cycle, per run that had cycles."""
    rows = ["| nodes | seed | arm | cycle | node-hours | $ | evictions by actor | launched | "
            "load before / after |", "|---" * 9 + "|"]
    for r in sorted(records, key=lambda r: (condition(r), r["seed"], r["order"])):
        for i, m in enumerate(r.get("cycles") or ()):
            actors = ", ".join(f"{k} {v}" for k, v in sorted(m["evictions"].items())) or "0"
            rows.append(f"| {r['nodes']} | {r['seed']} | {r['arm']} | {i + 1} | "
                        f"{m['node_hours']:.3f} | {m['dollars']:.3f} | {actors} | "
                        f"{m['launched']} | {r['load_before']:.1f} / {r['load_after']:.1f} |")
    return "\n".join(rows)
