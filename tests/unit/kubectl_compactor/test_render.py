"""The report drawn as a picture (``--plot``), and what the plugin says without matplotlib."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kubectl_compactor import cli as preview_cli
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
