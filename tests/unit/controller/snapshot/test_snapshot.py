"""A Snapshot's repr: counts, not records (asyncio formats a task's result)."""

from __future__ import annotations

from controller.snapshot.snapshot import Snapshot
from tests.unit.kubectl_compactor.test_report import NODES, PODS


def test_a_snapshot_shows_its_counts_not_its_records() -> None:
    """asyncio formats the result of the task that read it: with 150,000 Pods, seconds."""
    snapshot = Snapshot(nodes=tuple(NODES), pods=tuple(PODS))
    shown = repr(snapshot)
    assert "nodes=3," in shown and f"pods={len(PODS)}," in shown
    assert "PodInfo" not in shown and "NodeInfo" not in shown
