"""``loadtest.preview --against`` runs another checkout's plugin, wherever that checkout keeps
it: a package of its own, or inside the controller as checkouts made before the move did."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.kwok_cluster import Shape
from loadtest.preview import Run, counterfactual_share, plugin_module, verdicts


@pytest.mark.parametrize(("files", "module"), [
    (["kubectl_compactor/cli.py", "controller/__init__.py"], "kubectl_compactor.cli"),
    (["controller/preview_cli.py", "controller/preview.py"], "controller.preview_cli"),
], ids=["its-own-package", "inside-the-controller"])
def test_the_plugin_module_of_a_checkout(tmp_path: Path, files: list[str], module: str) -> None:
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("")
    assert plugin_module(tmp_path) == module


def _run(seconds: float, rss: int = 2**29, levers: int = 2) -> Run:
    return Run(seconds, seconds / 2, rss, 10, 4, 40, levers)


@pytest.mark.parametrize(("this", "bare", "passes"), [
    ([15.0, 14.0, 16.0], [10.0, 11.0, 9.0], True),  # +50 %: at the limit
    ([16.0, 16.0, 16.0], [10.0, 10.0, 10.0], False),
    ([10.0, 30.0, 11.0], [10.0, 10.0, 10.0], True),  # medians: one slow run does not count
])
def test_the_counterfactual_adds_at_most_half_the_wall_time(
        this: list[float], bare: list[float], passes: bool) -> None:
    shape = Shape(10, 300, 1.0)
    checks = {what: ok for what, ok, _ in verdicts(
        shape, [_run(s) for s in this], [_run(s, levers=0) for s in bare])}
    (ok,) = [ok for what, ok in checks.items() if "counterfactual" in what]
    assert ok is passes
    assert counterfactual_share([_run(15.0)], [_run(10.0)]) == pytest.approx(0.5)
