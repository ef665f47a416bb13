"""The protection contract every contender is held to, written once and expressed on the same
Pods in each tool's own words.

Three classes of Pod: what must never move, what may move within its disruption budget, and
what exists to be preempted. "Never" is said to Karpenter by ``karpenter.sh/do-not-disrupt``,
to the descheduler by ``prefer-no-eviction`` (with ``noEvictionPolicy: Mandatory`` in its
evictor), to Compactor and the Cluster Autoscaler by ``safe-to-evict: "false"``; a PDB at 0 says
it to all of them. The variant "migrating from the Cluster Autoscaler" keeps only the last
annotation: there the gap between what each tool reads is the thing measured.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from compaction import names

PREFER_NO_EVICTION: Final = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
PLACEHOLDER_PRIORITY: Final = -10


class Variant(enum.StrEnum):
    NATIVE = "native"  # each tool's own words on the never-move Pods
    CLUSTER_AUTOSCALER = "cluster-autoscaler"  # safe-to-evict alone, as a migrating cluster has


class Protection(enum.StrEnum):
    NEVER = "never move"
    BUDGET = "within its budget"
    PREEMPTIBLE = "exists to be preempted"
    NODE = "per node (DaemonSet)"


@dataclass(frozen=True)
class Guarded:
    """One protected workload of the start: what it is, how it is protected, and its PDB's
    ``maxUnavailable`` (None: no PDB)."""

    namespace: str
    name: str
    kind: str
    replicas: int
    cpu: str
    memory: str
    protection: Protection
    max_unavailable: str | None = None
    annotated: bool = False  # carries the never-move annotations
    priority_class: str | None = None


GUARDED: Final = (
    Guarded("production", "pinned", "Deployment", 1, "500m", "1Gi", Protection.NEVER,
            annotated=True),
    Guarded("production", "payments", "Deployment", 2, "500m", "1Gi", Protection.NEVER,
            max_unavailable="0"),
    Guarded("kube-system", "dns", "Deployment", 2, "100m", "128Mi", Protection.BUDGET,
            max_unavailable="1"),
    Guarded("headroom", "capacity-reservation", "Deployment", 2, "1", "2Gi",
            Protection.PREEMPTIBLE, priority_class="overprovisioning"),
    Guarded("production", "node-agent", "DaemonSet", 0, "50m", "64Mi", Protection.NODE),
)
# The apps' budgets, one after another: maxUnavailable 1, 25 %, then none.
APP_BUDGETS: Final = ("1", "25%", None)


def never_move_annotations(variant: Variant) -> dict[str, str]:
    """What a never-move Pod carries under ``variant``."""
    if variant is Variant.CLUSTER_AUTOSCALER:
        return {names.SAFE_TO_EVICT_ANNOTATION: "false"}
    return {names.SAFE_TO_EVICT_ANNOTATION: "false", names.DO_NOT_DISRUPT_ANNOTATION: "true",
            PREFER_NO_EVICTION: ""}


def app_budget(index: int) -> str | None:
    return APP_BUDGETS[index % len(APP_BUDGETS)]


def protection_of(namespace: str, workload: str) -> Protection:
    """The class of a workload's Pods; the seeded apps move within their budgets."""
    for g in GUARDED:
        if (g.namespace, g.name) == (namespace, workload):
            return g.protection
    return Protection.BUDGET


def render_markdown(variant: Variant = Variant.NATIVE) -> str:
    """The contract as a table, for docs/benchmarks.md."""
    words = ", ".join(f"`{k}: \"{v}\"`" if v else f"`{k}`"
                      for k, v in never_move_annotations(variant).items())
    rows = ["| Pods | class | how each tool is told |", "|---|---|---|"]
    for g in GUARDED:
        if g.protection is Protection.NEVER and g.annotated:
            how = words
        elif g.max_unavailable is not None:
            how = f"PDB `maxUnavailable: {g.max_unavailable}` (every tool reads PDBs)"
        elif g.protection is Protection.PREEMPTIBLE:
            how = f"priority {PLACEHOLDER_PRIORITY} (`{g.priority_class}`); moving it is no fault"
        else:
            how = "a DaemonSet Pod per node; its evictions are not counted"
        rows.append(f"| `{g.namespace}/{g.name}` ({g.replicas or 'per node'}) | "
                    f"{g.protection.value} | {how} |")
    budgets = ", ".join(f"`{b}`" if b else "none" for b in APP_BUDGETS)
    rows.append(f"| the seeded apps in `production` and `batch` | {Protection.BUDGET.value} | "
                f"PDB `maxUnavailable` in turn: {budgets} |")
    return "\n".join(rows)
