"""The wheel ships the product alone: pyproject's package list, applied to the checkout the way
setuptools' find_packages applies it, picks compaction, webhook, controller and certs (every
package of theirs) and none of the test harness, the benchmarks or the tests, which run from
the checkout instead (pytest's pythonpath)."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = {"compaction", "webhook", "controller", "kubectl_compactor", "certs"}
TOOLS = {"localcluster", "loadtest", "tests"}


def _pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def _packages(include: Sequence[str], exclude: Sequence[str] = ()) -> set[str]:
    """Regular packages (a directory with ``__init__.py``) under the root by dotted name, the
    ones an include pattern matches and no exclude pattern does, as setuptools finds them."""
    found: set[str] = set()

    def walk(directory: Path, prefix: str) -> None:
        for child in sorted(directory.iterdir()):
            if "." in child.name or not (child / "__init__.py").is_file():
                continue
            name = prefix + child.name
            if (any(fnmatchcase(name, p) for p in include)
                    and not any(fnmatchcase(name, p) for p in exclude)):
                found.add(name)
            walk(child, name + ".")

    walk(ROOT, "")
    return found


def test_the_wheel_takes_every_package_of_the_product_and_nothing_else() -> None:
    find = _pyproject()["tool"]["setuptools"]["packages"]["find"]
    assert find.get("namespaces") is False  # only directories with __init__.py are packages
    assert find.get("where", ["."]) == ["."]
    shipped = _packages(find["include"], find.get("exclude", ()))
    everything = _packages(["*"])
    assert {name.split(".")[0] for name in shipped} == PRODUCT
    assert shipped == {name for name in everything if name.split(".")[0] in PRODUCT}
    assert TOOLS <= everything  # there, in the checkout, and left out of the wheel


def test_pytest_finds_the_tools_in_the_checkout() -> None:
    assert "." in _pyproject()["tool"]["pytest"]["ini_options"]["pythonpath"]
