"""The pure parts of tools/build-images.sh: the build context's key and the Debian mirror."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from localcluster.image_build import (
    context_files,
    context_key,
    copied_sources,
    debian_mirror,
    ignore_patterns,
)

ROOT = Path(__file__).resolve().parents[2]


def test_copied_sources_are_the_context_paths_of_copy_and_add_not_other_stages() -> None:
    dockerfile = """FROM base AS build
COPY pyproject.toml README.md ./
COPY --chown=1:1 pkg ./pkg
ADD ["data dir/x.txt", "/x"]
COPY a \\
  b /dst/
# COPY commented /nope
FROM base
COPY --from=build /opt/app /opt/app
"""
    assert copied_sources(dockerfile) == [
        "pyproject.toml", "README.md", "pkg", "data dir/x.txt", "a", "b"]


def test_the_repos_dockerfile_copies_the_packaged_sources() -> None:
    sources = copied_sources((ROOT / "Dockerfile").read_text())
    assert {"pyproject.toml", "compaction", "webhook", "controller", "certs"} <= set(sources)


def _tree(tmp: Path) -> Path:
    (tmp / "pkg" / "__pycache__").mkdir(parents=True)
    (tmp / "pkg" / "a.py").write_text("A = 1\n")
    (tmp / "pkg" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    (tmp / "other.py").write_text("not copied\n")
    (tmp / "Dockerfile").write_text("FROM base\nCOPY pkg ./pkg\n")
    (tmp / ".dockerignore").write_text("# caches\n**/__pycache__\n**/*.pyc\n")
    return tmp


def test_the_key_follows_what_reaches_the_image_and_nothing_else(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    key = context_key(root)
    assert key == context_key(root)
    (root / "other.py").write_text("changed, but never copied\n")
    (root / "pkg" / "__pycache__" / "b.cpython-311.pyc").write_bytes(b"\1")
    assert context_key(root) == key
    assert context_key(root, extra="base=2") != key
    (root / "pkg" / "a.py").write_text("A = 2\n")
    changed = context_key(root)
    assert changed != key
    (root / "pkg" / "a.py").chmod(0o755)
    assert context_key(root) != changed
    (root / "pkg" / "a.py").chmod(0o644)
    (root / ".dockerignore").write_text("**/__pycache__\n")
    assert context_key(root) != changed
    (root / "Dockerfile").write_text("FROM base\nCOPY pkg ./pkg\nUSER 1\n")
    assert context_key(root) != changed


def test_a_moved_file_changes_the_key(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    key = context_key(root)
    (root / "pkg" / "sub").mkdir()
    shutil.move(root / "pkg" / "a.py", root / "pkg" / "sub" / "a.py")
    assert context_key(root) != key


def test_context_files_skip_ignored_parts_and_fail_on_a_missing_source(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    assert context_files(root, ["pkg"], ignore_patterns("**/__pycache__\n")) == [
        Path("pkg/a.py")]
    (root / "pkg" / "tests").mkdir()
    (root / "pkg" / "tests" / "t.py").write_text("")
    (root / "tests").mkdir()
    (root / "tests" / "t.py").write_text("")
    # Anchored at the root, as the engines read it: pkg/tests is copied, tests/ is not.
    assert context_files(root, ["pkg", "tests"], ignore_patterns("tests\n**/*.pyc\n")) == [
        Path("pkg/a.py"), Path("pkg/tests/t.py")]
    with pytest.raises(FileNotFoundError, match="nope"):
        context_files(root, ["nope"], [])


def test_the_repo_ignores_bytecode_so_running_the_tests_keeps_the_key() -> None:
    patterns = ignore_patterns((ROOT / ".dockerignore").read_text())
    assert {"**/__pycache__", "**/*.pyc"} <= set(patterns)


def test_the_mirror_is_the_first_deb_source_of_the_suite_in_either_format() -> None:
    deb822 = """# comment
Types: deb-src
URIs: http://src.example/debian
Suites: bookworm
Components: main

Types: deb
URIs: http://disabled.example/debian
Suites: bookworm
Enabled: no

Types: deb
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://security.example/debian-security
Suites: bookworm-security
"""
    one_line = ("# deb http://old.example/debian bookworm main\n"
                "deb [arch=amd64 signed-by=/k.gpg] http://list.example/debian bookworm main\n")
    assert debian_mirror([("debian.sources", deb822)], "bookworm") == "http://mirror.example/debian"
    assert debian_mirror([("sources.list", one_line), ("debian.sources", deb822)],
                         "bookworm") == "http://list.example/debian"
    assert debian_mirror([("debian.sources", deb822)], "trixie") is None
    assert debian_mirror([("x.list.disabled", one_line)], "bookworm") is None
