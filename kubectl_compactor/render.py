"""The report as text, as JSON or YAML (``-o``), and as a picture of every node's load
(``--plot``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compaction import quantity
from kubectl_compactor.counterfactual import Kind, Relaxed
from kubectl_compactor.failure import Failure
from kubectl_compactor.report import HOURS_PER_MONTH, NodeLoad, Report


def as_dict(report: Report) -> dict[str, Any]:
    """The report for ``-o json|yaml``: plain data, stable keys."""
    b = report.bounds
    return {
        "policies": list(report.policies),
        "nodes": report.nodes,
        "nodesInUse": list(report.in_use),
        "emptyNodes": list(report.empty),
        "freeable": [{"node": f.node, "podsToMove": f.pods, "evictions": f.evictions,
                      "hourlyPrice": f.hourly} for f in report.freeable],
        "stays": {name: [{"code": r.code.value, "reason": r.text} for r in rs]
                  for name, rs in report.stays.items()},
        "heldBy": [{"code": h.code.value, "cause": h.cause, "count": len(h.nodes),
                    "nodes": list(h.nodes), "example": h.example} for h in report.held],
        "nodesAfter": b.nodes_after,
        "lowerBound": b.lower_bound,
        "lowerBoundPerResource": dict(b.per_resource),
        "ffdPacking": b.ffd,
        "nodeCapacity": {r: _quantity(r, v) for r, v in b.capacity.items()},
        "podsToMove": report.pods_to_move,
        "evictions": report.evictions,
        "unsimulated": [{"pod": u.pod, "node": u.node, "reason": u.reason}
                        for u in report.unsimulated],
        "savings": None if report.savings is None else {
            "monthly": round(report.savings.monthly, 2), "hoursPerMonth": HOURS_PER_MONTH,
            "pricedNodes": report.savings.priced,
            "unpricedNodes": list(report.savings.unpriced)},
        "counterfactual": None if report.counterfactual is None else [
            _relaxed(r) for r in report.counterfactual],
    }


def _relaxed(r: Relaxed) -> dict[str, Any]:
    return {"kind": r.lever.kind.value, "target": r.lever.target,
            **({"annotation": r.lever.annotation} if r.lever.annotation else {}),
            "change": r.change, "estimate": r.estimate, "planned": r.more is not None,
            "moreNodes": r.more, "nodes": list(r.nodes),
            "systemPoolNodes": r.pool_nodes,
            "monthlySavings": None if r.monthly is None else round(r.monthly, 2)}


def _quantity(resource: str, milli: int) -> str:
    if resource == "pods":
        return str(milli // quantity.UNIT)
    if resource == "memory":
        return f"{milli // 1000 // 2**20}Mi"
    return f"{milli}m" if resource == "cpu" else str(milli // 1000)


def _names(nodes: Sequence[str], most: int = 5) -> str:
    shown = ", ".join(nodes[:most])
    return shown + (f", … ({len(nodes) - most} more)" if len(nodes) > most else "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def text(report: Report) -> str:
    """The report for a person."""
    b = report.bounds
    lines = [
        f"Policies judged: {', '.join(report.policies) or '(none enabled)'}",
        f"Nodes in use: {len(report.in_use)} of {report.nodes}"
        + (f" ({_plural(len(report.empty), 'node')} run only DaemonSet or mirror Pods)"
           if report.empty else ""),
        "",
        f"Could free {_plural(len(report.freeable), 'node')}"
        + (", in the order they would be drained:" if report.freeable else "."),
    ]
    for i, f in enumerate(report.freeable, 1):
        price = (f", saves ${f.hourly * HOURS_PER_MONTH:,.2f}/month" if f.hourly is not None
                 else "")
        lines.append(f"  {i}. {f.node}: costs {_plural(f.evictions, 'eviction')}{price} "
                     f"({_plural(f.pods, 'Pod')} to move)")
    lines += ["", f"Nodes that stay: {len(report.stays)}"]
    for h in report.held:
        lines.append(f"  {_plural(len(h.nodes), 'node')} held by: {h.cause} ({h.code})")
        lines.append(f"      {_names(h.nodes)}; e.g. {h.example}")
    per = ", ".join(f"{r} {n}" for r, n in b.per_resource.items())
    lines += [
        "",
        f"Nodes after: {b.nodes_after} (in use {len(report.in_use)} - freeable "
        f"{len(report.freeable)})",
        f"  lower bound: {b.lower_bound} (requests / node capacity: {per})",
        f"  first-fit-decreasing packing of all requests: {b.ffd}",
        f"Pods to move: {report.pods_to_move} ({_plural(report.evictions, 'eviction')})",
    ]
    if report.unsimulated:
        lines.append(f"Not simulated: {_plural(len(report.unsimulated), 'Pod')} "
                     "(their nodes are judged as if they could not move)")
        lines += [f"  {u.pod} on {u.node}: {u.reason}" for u in report.unsimulated]
    s = report.savings
    if s is not None:
        unpriced = (f"; {_plural(len(s.unpriced), 'freed node')} without a price: "
                    f"{_names(s.unpriced)}" if s.unpriced else "")
        lines.append(f"Savings: ${s.monthly:,.2f}/month ({HOURS_PER_MONTH} h) for "
                     f"{_plural(s.priced, 'priced node')}{unpriced}")
    if report.counterfactual is not None:
        lines += ["", *_counterfactual(report.counterfactual)]
    return "\n".join(lines)


def _counterfactual(relaxed: Sequence[Relaxed]) -> list[str]:
    """What would free more, each lever alone: planned again, then the estimated rest."""
    if not relaxed:
        return ["What would free more: nothing a setting, budget or annotation holds."]
    lines = ["What would free more (each change alone, planned again):"]
    for i, r in enumerate(x for x in relaxed if x.more is not None):
        what = r.lever.target if r.lever.kind is not Kind.ANNOTATION else \
            f"{r.lever.target} ({r.lever.annotation})"
        pool = (f", its own pool about {_plural(r.pool_nodes, 'node')}" if r.pool_nodes
                else "")
        price = f", saves ${r.monthly:,.2f}/month" if r.monthly is not None else ""
        lines.append(f"  {i + 1}. {r.lever.kind.value} {what}: frees "
                     f"{r.more} more {'node' if r.more == 1 else 'nodes'}{pool}{price}")
        lines.append(f"      {r.change}")
    rest = [r for r in relaxed if r.more is None]
    if rest:
        lines.append(f"  Not planned again ({len(rest)}; by the nodes each alone holds): "
                     + _names([f"{r.lever.kind.value} {r.lever.target} ({r.estimate})"
                               for r in rest]))
    return lines


def plot(node_loads: Sequence[NodeLoad], file: str) -> None:
    """Requested CPU and memory per node, before and after, as the demo draws CPU."""
    try:
        import matplotlib
    except ImportError as e:
        raise Failure("--plot needs matplotlib (pip install matplotlib)") from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = range(len(node_loads))
    names = [n.node for n in node_loads]
    fig, axes = plt.subplots(2, 1, figsize=(max(10, len(node_loads) * 0.5), 7), sharex=True)
    for ax, unit, scale, values in (
            (axes[0], "requested CPU (cores)", 1000,
             [(n.cpu_before, n.cpu_after, n.cpu_allocatable) for n in node_loads]),
            (axes[1], "requested memory (GiB)", 2**30,
             [(n.memory_before, n.memory_after, n.memory_allocatable) for n in node_loads])):
        ax.bar([i - 0.2 for i in x], [b / scale for b, _, _ in values], 0.4, label="before")
        ax.bar([i + 0.2 for i in x], [a / scale for _, a, _ in values], 0.4,
               label="after the plan")
        ax.hlines([c / scale for _, _, c in values], [i - 0.45 for i in x],
                  [i + 0.45 for i in x], color="grey", linestyle="--", label="allocatable")
        ax.set_ylabel(unit)
        ax.legend(loc="upper right")
    axes[1].set_xticks(list(x), names, rotation=45, ha="right")
    axes[0].set_title("Requested CPU and memory per node, before and after the plan")
    fig.tight_layout()
    try:
        fig.savefig(file, dpi=100, format="png")
    except OSError as e:
        raise Failure(f"{file}: cannot write: {e.strerror or e}") from e
    finally:
        plt.close(fig)
