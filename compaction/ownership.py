"""Which object of a Pod's owner chain is its workload, the only authority for intent.

The chain is followed through intermediate owners, which are never read for intent: a
ReplicaSet (the Deployment controller copies its Deployment's annotations onto it and never
removes one the Deployment dropped, so its copy can be stale) and a Job that a CronJob or an
Argo AnalysisRun created. The first owner that is not an intermediate is the workload, if its
kind is one Compactor manages. Webhook and controller both decide with this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from compaction.workload import WorkloadType

REPLICA_SET: Final = "ReplicaSet"
# Kinds that create Jobs of their own: their Jobs' Pods belong to them.
JOB_OWNERS: Final = frozenset({WorkloadType.CRON_JOB.value, WorkloadType.ANALYSIS_RUN.value})
WORKLOAD_KINDS: Final = frozenset(t.value for t in WorkloadType)
# Every kind an owner chain may pass through.
CHAIN_KINDS: Final = WORKLOAD_KINDS | {REPLICA_SET}
# Pod -> Job -> AnalysisRun is the longest real chain; a deeper one is not followed.
MAX_DEPTH: Final = 4


def is_intermediate(kind: str, parent_kind: str | None) -> bool:
    """An owner that is only a step towards the workload above it."""
    if kind == REPLICA_SET:
        return True
    return kind == WorkloadType.JOB.value and parent_kind in JOB_OWNERS


def workload_index(kinds: Sequence[str]) -> int | None:
    """Position of the workload in a chain of owner kinds, nearest owner first; None when the
    chain holds none (a ReplicaSet without a Deployment or Rollout, an unmanaged kind)."""
    for i, kind in enumerate(kinds[:MAX_DEPTH]):
        if kind not in CHAIN_KINDS:
            return None
        parent = kinds[i + 1] if i + 1 < len(kinds) else None
        if not is_intermediate(kind, parent):
            return i
    return None


def is_workload(kind: str, controller_kind: str | None) -> bool:
    """Whether an object of ``kind`` whose controller owner is ``controller_kind`` is a
    workload in its own right (a CronJob's Job is not: the CronJob is)."""
    return kind in WORKLOAD_KINDS and not is_intermediate(kind, controller_kind)
