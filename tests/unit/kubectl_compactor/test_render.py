"""The report drawn as a picture (``--plot``), and what the plugin says without matplotlib."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from kubectl_compactor import cli as preview_cli
from kubectl_compactor import render
from kubectl_compactor import report as preview
from tests.unit.controller.drain_planner.test_planner import NOW
from tests.unit.kubectl_compactor.test_cluster_read import reads
from tests.unit.kubectl_compactor.test_report import spread_snapshot


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
