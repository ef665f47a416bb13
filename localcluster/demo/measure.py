"""Measurements of a compaction run: where Pods are, and the report (the packing bounds it
holds are computed by ``compaction.packing``)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from compaction import names
from localcluster.cluster.kube import Kube, path
from localcluster.demo.scenario import MANAGED_NAMESPACES, PROTECTED

_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6,
          "G": 10**9}


def cpu_millis(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def mem_bytes(q: str) -> int:
    for suffix, factor in _UNITS.items():
        if q.endswith(suffix):
            return int(float(q[: -len(suffix)]) * factor)
    return int(q)


@dataclass(frozen=True)
class PodFact:
    namespace: str
    name: str
    uid: str
    app: str
    node: str
    cpu: int
    memory: int
    scheduler: str
    policy_label: str | None
    phase: str

    @property
    def protected(self) -> bool:
        return (self.namespace, self.app) in PROTECTED

    @property
    def managed(self) -> bool:
        """Pods the compaction may move: in scope and not protected."""
        return self.namespace in MANAGED_NAMESPACES and not self.protected

    @property
    def stays(self) -> bool:
        """Counted by ``kubectl compactor plan`` as holding its node after the plan: any Pod
        but a DaemonSet's, a placeholder, or Compactor's own (created with the policy)."""
        return self.namespace != names.INSTALL_NAMESPACE and PROTECTED.get(
            (self.namespace, self.app)) not in ("DaemonSet", "placeholder, priority -10")

    @property
    def immovable(self) -> bool:
        """Pods that keep their node: Compactor's own (the compaction scheduler) and the
        protected ones, but DaemonSet Pods (on every node) and placeholders (the Cluster
        Autoscaler removes a node they alone hold)."""
        if self.namespace == names.INSTALL_NAMESPACE:
            return True
        return self.protected and PROTECTED[(self.namespace, self.app)] not in (
            "DaemonSet", "placeholder, priority -10")


def snapshot(kube: Kube) -> list[PodFact]:
    out = []
    for pod in kube.items(path("pods")):
        meta, spec = pod["metadata"], pod["spec"]
        if meta.get("deletionTimestamp"):
            continue
        requests = [c.get("resources", {}).get("requests", {}) for c in spec["containers"]]
        out.append(PodFact(
            meta["namespace"], meta["name"], meta["uid"], (meta.get("labels") or {}).get(
                "app", ""), spec.get("nodeName", ""),
            sum(cpu_millis(r.get("cpu", "0")) for r in requests),
            sum(mem_bytes(r.get("memory", "0")) for r in requests),
            spec.get("schedulerName", ""), (meta.get("labels") or {}).get(names.POLICY_LABEL),
            pod["status"].get("phase", "")))
    return out


def nodes_with(pods: Iterable[PodFact]) -> set[str]:
    return {p.node for p in pods if p.node}


def cpu_by_node(pods: Iterable[PodFact], nodes: Sequence[str]) -> dict[str, int]:
    used: dict[str, int] = defaultdict(int)
    for p in pods:
        if p.node:
            used[p.node] += p.cpu
    return {n: used.get(n, 0) for n in nodes}


@dataclass
class Report:
    nodes_before: int
    nodes_after: int
    in_use_before: int  # nodes running any Pod but a DaemonSet's: what cannot be removed
    in_use_after: int
    ffd_around_blockers: int  # the packing when the Pods that cannot move stay where they are
    ffd_packing: int  # first-fit decreasing of the same requests: a packing that exists
    lower_bound: int  # no packing can do with fewer nodes
    runtime_evictions: int
    descheduler_evictions: int
    late_evictions: int  # descheduler evictions after the last run that freed a node
    bounced: int  # descheduler evictions whose replacement came back to the same node
    evictions_off_freed: int  # descheduler evictions from nodes that ended freed
    movable_on_freed: int  # managed Pods seen on the nodes that ended freed
    descheduler_runs: int
    seconds: float
    pdb_violations: int
    protected_moved: int
    nodes_total: int
    # ``kubectl compactor plan`` just before the policy: nodes in use (any Pod but a DaemonSet's
    # or a mirror Pod) - freeable; compare with in_use_after.
    predicted_after: int | None = None
    # Nodes after holding a Pod the forecast counts as staying: any but a DaemonSet's, a
    # placeholder (the plan moves it without an eviction; an autoscaler removes a node it
    # alone holds) or Compactor's own (its scheduler's Pod lands only after the policy).
    kept_after: int | None = None
    predicted_in_use: int | None = None
    predicted_freeable: int | None = None
    # With Karpenter making the nodes: nodes it removed, NodeClaims it created after the policy
    # (0 when the plan and the scheduler agree) and seconds from the policy to the last removal.
    nodes_removed: int | None = None
    nodes_launched: int | None = None
    seconds_to_last_removal: float | None = None
    # Where the drains' evictees came back, as the controller counted them against its plan
    # (compactor_drain_landings_total): planned_node, kept_node, free_node.
    landings: dict[str, int] = field(default_factory=dict)
    # Every eviction the Pods' watch saw, by any actor (the descheduler's drains and the
    # runtime hook), and those whose replacement landed back on the node the evicted Pod left,
    # per workload (``localcluster.demo.evictions``).
    evictions: int | None = None
    came_back: int | None = None
    came_back_by: dict[str, int] = field(default_factory=dict)
    evictions_from_kept: int | None = None  # of them from nodes kept after: no node freed
    # Nodes before holding a Pod the forecast counts as staying, counted as ``kept_after``.
    kept_before: int | None = None

    @property
    def net_removed(self) -> int | None:
        """Nodes kept before less nodes kept after, both counted as the forecast counts."""
        if self.kept_before is None or self.kept_after is None:
            return None
        return self.kept_before - self.kept_after

    @property
    def per_net_removed(self) -> float | None:
        """Evictions by any actor per net node removed; none where no node was removed."""
        net = self.net_removed
        if self.evictions is None or net is None or net <= 0:
            return None
        return self.evictions / net

    def landed(self) -> str:
        return " / ".join(str(self.landings.get(o, 0))
                          for o in ("planned_node", "kept_node", "free_node"))

    @property
    def futile_evictions(self) -> int:
        """Evictions that freed nothing: after the last gain, or back to the same node."""
        return self.late_evictions + self.bounced

    def rows(self) -> list[tuple[str, str]]:
        """What a user pays for first: nodes in use, then nodes removed."""
        return [
            ("nodes in use (any Pod but a DaemonSet's), before", str(self.in_use_before)),
            ("nodes in use, after", str(self.in_use_after)),
            *self._autoscaler_rows(),
            ("nodes carrying managed Pods, before", str(self.nodes_before)),
            ("nodes carrying managed Pods, after", str(self.nodes_after)),
            ("first-fit-decreasing packing of the same requests", str(self.ffd_packing)),
            ("  forecast by kubectl compactor plan (in use - freeable)", self._forecast()),
            ("  reached, counted as the forecast counts", str(self.kept_after)),
            ("  packing with the unmovable Pods left in place", str(self.ffd_around_blockers)),
            ("lower bound (requests / capacity)", str(self.lower_bound)),
            ("nodes freed", f"{self.nodes_before - self.nodes_after} of {self.nodes_total}"),
            ("evictions by the runtime hook", str(self.runtime_evictions)),
            ("evictions by the descheduler", str(self.descheduler_evictions)),
            ("  of them from nodes that ended freed", str(self.evictions_off_freed)),
            ("  movable Pods seen on those nodes", str(self.movable_on_freed)),
            ("evictions by any actor, as the Pods' watch saw them", _count(self.evictions)),
            ("  came back to the node they left", self.came_back_text()),
            ("  from nodes kept after", _count(self.evictions_from_kept)),
            ("  per net node removed (kept before - kept after)", self.per_net_text()),
            ("futile descheduler evictions (late / bounced back)",
             f"{self.futile_evictions} ({self.late_evictions} / {self.bounced})"),
            ("drain landings: planned node / another kept node / a node counted free",
             self.landed()),
            ("descheduler runs to converge", str(self.descheduler_runs)),
            ("wall time to converge", f"{self.seconds:.0f} s"),
            ("PDB violations", str(self.pdb_violations)),
            ("protected Pods moved", str(self.protected_moved)),
        ]

    def _autoscaler_rows(self) -> list[tuple[str, str]]:
        if self.nodes_removed is None:
            return [("nodes removed", "0 (no autoscaler: --autoscaler karpenter removes them)")]
        last = self.seconds_to_last_removal
        return [
            ("nodes removed (by Karpenter)", f"{self.nodes_removed} of {self.nodes_total}"),
            ("nodes launched during the compaction", str(self.nodes_launched)),
            ("time from the policy to the last removal",
             "-" if last is None else f"{last:.0f} s"),
        ]

    def came_back_text(self) -> str:
        if self.came_back is None:
            return "-"
        where = ", ".join(f"{w} {n}" for w, n in self.came_back_by.items())
        return f"{self.came_back}" + (f" ({where})" if where else "")

    def per_net_text(self) -> str:
        per = self.per_net_removed
        return "-" if per is None else f"{per:.1f} ({self.evictions} / {self.net_removed})"

    def _forecast(self) -> str:
        if self.predicted_after is None:
            return "-"
        return (f"{self.predicted_after} ({self.predicted_in_use} - "
                f"{self.predicted_freeable})")

    def table(self) -> str:
        width = max(len(k) for k, _ in self.rows())
        return "\n".join(f"  {k:<{width}}  {v}" for k, v in self.rows())


def repeats_table(reports: list[Report]) -> str:
    """Runs side by side as a Markdown table, with how many met each target."""
    head = ("| run | nodes after | packing around unmovable Pods | FFD packing | lower bound "
            "| futile evictions | descheduler evictions / movable Pods of freed nodes "
            "| landings planned / kept / free "
            "| protected moved, PDB violations | converge |\n" + "|---" * 10 + "|")
    rows = [f"| {i} | {r.nodes_after} | {r.ffd_around_blockers} | {r.ffd_packing} "
            f"| {r.lower_bound} | {r.futile_evictions} "
            f"| {r.descheduler_evictions} / {r.movable_on_freed} | {r.landed()} "
            f"| {r.protected_moved}, {r.pdb_violations} | {r.seconds:.0f} s |"
            for i, r in enumerate(reports, 1)]
    n = len(reports)
    met = (f"nodes after = packing around unmovable Pods: "
           f"{sum(r.nodes_after == r.ffd_around_blockers for r in reports)} of {n}; "
           f"= FFD packing: {sum(r.nodes_after == r.ffd_packing for r in reports)} of {n}; "
           f"0 futile: {sum(r.futile_evictions == 0 for r in reports)} of {n}; "
           f"0 landings on a free node: "
           f"{sum(r.landings.get('free_node', 0) == 0 for r in reports)} of {n}; "
           f"evictions <= movable Pods of freed nodes: "
           f"{sum(r.descheduler_evictions <= r.movable_on_freed for r in reports)} of {n}")
    return "\n".join([head, *rows, "", met])


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


def _median(values: Sequence[float]) -> str:
    return f"{round(statistics.median(values), 2):g}" if values else "-"


def disruption_table(reports: list[Report]) -> str:
    """Per run, what the nodes removed cost in evictions (by any actor), and how many of those
    came back to the node they left; then the medians over the runs."""
    head = ("| run | evictions: all (descheduler / runtime hook) | of them from nodes kept "
            "after | came back to the node they left | nodes in use before → after, counted "
            "alike | evictions per net node removed | nodes carrying managed Pods after |\n"
            + "|---" * 7 + "|")
    rows = []
    for i, r in enumerate(reports, 1):
        per = r.per_net_removed
        rows.append(f"| {i} | {_count(r.evictions)} ({r.descheduler_evictions} / "
                    f"{r.runtime_evictions}) | {_count(r.evictions_from_kept)} "
                    f"| {r.came_back_text()} "
                    f"| {_count(r.kept_before)} → {_count(r.kept_after)} "
                    f"| {'-' if per is None else f'{per:.1f}'} | {r.nodes_after} |")
    n = len(reports)
    ratios = [p for r in reports if (p := r.per_net_removed) is not None]
    summary = (f"came back 0: {sum(r.came_back == 0 for r in reports)} of {n}; medians: "
               f"evictions per net node removed "
               f"{_median(ratios)}, nodes after counted alike "
               f"{_median([r.kept_after for r in reports if r.kept_after is not None])}, "
               f"nodes carrying managed Pods after {_median([r.nodes_after for r in reports])}, "
               f"came back {_median([r.came_back for r in reports if r.came_back is not None])}")
    return "\n".join([head, *rows, "", summary])


def removal_table(reports: list[Report]) -> str:
    """Per run with Karpenter making the nodes: what a user pays for, before and after."""
    head = ("| run | nodes in use before | nodes in use after | nodes removed | nodes launched "
            "during the compaction | policy to last removal | nodes carrying managed Pods after "
            "| protected moved, PDB violations |\n" + "|---" * 8 + "|")
    rows = [f"| {i} | {r.in_use_before} | {r.in_use_after} | {r.nodes_removed} "
            f"| {r.nodes_launched} | "
            + ("-" if r.seconds_to_last_removal is None else f"{r.seconds_to_last_removal:.0f} s")
            + f" | {r.nodes_after} | {r.protected_moved}, {r.pdb_violations} |"
            for i, r in enumerate(reports, 1)]
    return "\n".join([head, *rows])


def forecast_table(reports: list[Report]) -> str:
    """Per run, what ``kubectl compactor plan`` forecast just before the policy beside what the
    run reached: nodes in use (any Pod but a DaemonSet's) after."""
    head = ("| run | forecast: nodes after (in use - freeable) | reached, counted alike "
            "(no placeholder-only or Compactor-only node) | nodes in use after "
            "| nodes carrying managed Pods after |\n" + "|---" * 5 + "|")
    rows = [f"| {i} | {r.predicted_after} ({r.predicted_in_use} - {r.predicted_freeable}) "
            f"| {r.kept_after} | {r.in_use_after} | {r.nodes_after} |"
            for i, r in enumerate(reports, 1)]
    equal = sum(r.predicted_after == r.kept_after for r in reports)
    return "\n".join([head, *rows, "", f"forecast = reached: {equal} of {len(reports)}"])


def plot(before: dict[str, int], after: dict[str, int], capacity_millis: int,
         file: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nodes = list(before)
    x = range(len(nodes))
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.bar([i - 0.2 for i in x], [before[n] / 1000 for n in nodes], 0.4, label="before")
    ax.bar([i + 0.2 for i in x], [after[n] / 1000 for n in nodes], 0.4, label="after")
    ax.axhline(capacity_millis / 1000, color="grey", linestyle="--", label="allocatable")
    ax.set_xticks(list(x), nodes, rotation=45, ha="right")
    ax.set_ylabel("requested CPU (cores)")
    ax.set_title("Requested CPU per node, before and after compaction")
    ax.legend()
    fig.tight_layout()
    fig.savefig(file, dpi=100)
    plt.close(fig)
    return file
