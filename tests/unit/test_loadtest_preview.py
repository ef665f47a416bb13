"""``loadtest.preview --against`` runs another checkout's plugin, wherever that checkout keeps
it: a package of its own, or inside the controller as checkouts made before the move did."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.preview import plugin_module


@pytest.mark.parametrize(("files", "module"), [
    (["kubectl_compactor/cli.py", "controller/__init__.py"], "kubectl_compactor.cli"),
    (["controller/preview_cli.py", "controller/preview.py"], "controller.preview_cli"),
], ids=["its-own-package", "inside-the-controller"])
def test_the_plugin_module_of_a_checkout(tmp_path: Path, files: list[str], module: str) -> None:
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("")
    assert plugin_module(tmp_path) == module
