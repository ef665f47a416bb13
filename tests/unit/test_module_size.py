"""No module of the controller or the kubectl plugin grows past 400 lines: past that a module
holds more than one concept, and its seams are where it should be split."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 400


def _modules() -> list[Path]:
    return sorted(p for package in ("controller", "kubectl_compactor")
                  for p in (ROOT / package).rglob("*.py"))


def test_the_packages_hold_modules() -> None:
    assert len(_modules()) > 40


@pytest.mark.parametrize("module", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_exceeds_the_limit(module: Path) -> None:
    lines = len(module.read_text().splitlines())
    assert lines <= LIMIT, f"{module.relative_to(ROOT)}: {lines} lines"
