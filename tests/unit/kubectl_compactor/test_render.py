"""The report drawn as a picture (``--plot``), and what the plugin says without matplotlib."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from controller.drain_planner.drain_plan import DrainPlan
from controller.snapshot.snapshot import Snapshot
from kubectl_compactor import cli as preview_cli
from kubectl_compactor import inputs, render
from kubectl_compactor import report as preview
from tests.unit.controller.drain_planner.test_planner import NOW
from tests.unit.kubectl_compactor.test_cluster_read import reads
from tests.unit.kubectl_compactor.test_report import MOVED, NODES, PODS, spread_snapshot


def test_plot_writes_a_png(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    snapshot = spread_snapshot()
    monkeypatch.setattr(preview_cli, "read_cluster", reads(snapshot))
    file = tmp_path / "plan.png"
    code, out, errors = preview_cli.run(["plan", "--plot", str(file)])
    assert (code, errors) == (0, [])
    assert "Could free 2 nodes" in out
    assert file.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_so(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preview_cli, "read_cluster", reads(spread_snapshot()))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises
    file = tmp_path / "plan.png"
    code, out, errors = preview_cli.run(["plan", "--plot", str(file)])
    assert (code, out) == (2, "")
    assert errors == ["--plot needs matplotlib (pip install matplotlib)"]
    assert not file.exists()


def test_the_data_renderings_hold_plain_values_yaml_can_write() -> None:
    """Reason codes are an enum in the report and plain strings in ``-o yaml|json``."""
    snapshot = spread_snapshot()
    report = preview.build(snapshot, preview.preview_drains(snapshot, NOW))
    data = render.as_dict(report)
    assert data["stays"] and data["heldBy"], data
    assert yaml.safe_load(yaml.safe_dump(data)) == json.loads(json.dumps(data))
    assert all(type(h["code"]) is str for h in data["heldBy"])


def test_each_freeable_node_shows_its_cost_beside_its_price() -> None:
    """The cost is the plan's (``DrainPlan.costs``), not a count of its own."""
    drains = (DrainPlan("p", ("n1", "n2", "n3"), ("n1", "n2"), moves=MOVED,
                        costs={"n1": 1, "n2": 1}),)
    snapshot = Snapshot(nodes=tuple(NODES), pods=tuple(PODS))
    priced = preview.build(snapshot, drains, inputs.Prices({"m5.large": 0.1}))
    lines = render.text(priced).splitlines()
    assert "  1. n1: costs 1 eviction, saves $73.00/month (2 Pods to move)" in lines
    assert "  2. n2: costs 1 eviction (1 Pod to move)" in lines  # no price for its type
    assert [(f["node"], f["evictions"], f["hourlyPrice"])
            for f in render.as_dict(priced)["freeable"]] == [("n1", 1, 0.1), ("n2", 1, None)]
