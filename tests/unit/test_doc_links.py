"""Every relative link of README.md and docs/*.md resolves: the file or folder it names exists,
and its ``#anchor`` names a heading of the page it points to, by GitHub's rule (lower-case,
spaces to '-', punctuation but '-' and '_' dropped; a repeated heading gets -1, -2, ...).
Links in code (fenced blocks, `spans`) are not links; absolute URLs are not checked."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
# [text](target) and ![alt](target), with an optional "title"; text may hold one [nested] pair.
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s<>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?")
# A code span may run over a line break, never over a blank line.
_CODE_SPAN = re.compile(r"(`+)(?:(?!\n[ \t]*\n).)+?\1", re.DOTALL)
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # https:, mailto:, ...
_LINE_ANCHOR = re.compile(r"^L\d+(?:-L\d+)?$")  # a line of a file that is not Markdown


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link counts by its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _prose(page: Path) -> list[str]:
    """The page's lines, those of fenced code blocks blanked (so line numbers stay)."""
    lines: list[str] = []
    fenced = False
    for line in page.read_text().splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            lines.append("")
            continue
        lines.append("" if fenced else line)
    return lines


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in _prose(page):
        out.update(_HTML_ANCHOR.findall(line))
        heading = _HEADING.match(line)
        if not heading:
            continue
        base = anchor(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def links(page: Path) -> list[tuple[int, str]]:
    """(line number, target) of every link of the page, code left out; a link's text may run
    over a line break."""
    text = _CODE_SPAN.sub(lambda m: "\n" * m.group(0).count("\n"), "\n".join(_prose(page)))
    found = [(m.start(), m.group(1)) for m in _LINK.finditer(text)]
    offset = 0
    for line in text.split("\n"):
        reference = _REFERENCE.match(line)
        if reference:
            found.append((offset, reference.group(1)))
        offset += len(line) + 1
    return [(text.count("\n", 0, at) + 1, target) for at, target in sorted(found)]


def broken_links(pages: list[Path], root: Path) -> list[str]:
    """``page:line: target: why`` for every relative link or anchor that does not resolve."""
    broken: list[str] = []
    cache: dict[Path, set[str]] = {}
    for page in pages:
        for number, target in links(page):
            if _SCHEME.match(target) or target.startswith("//"):
                continue
            where = f"{page.relative_to(root)}:{number}: {target}"
            path, _, fragment = target.partition("#")
            if not path and not fragment:
                broken.append(f"{where}: empty link")
                continue
            resolved = (page.parent / unquote(path)).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{where}: no such file")
                continue
            if not fragment:
                continue
            if resolved.suffix != ".md":
                if not _LINE_ANCHOR.match(fragment):
                    broken.append(f"{where}: an anchor into a file that is not Markdown")
                continue
            if resolved not in cache:
                cache[resolved] = anchors(resolved)
            if unquote(fragment) not in cache[resolved]:
                broken.append(f"{where}: no heading of {resolved.name} makes #{fragment}")
    return broken


def test_the_readme_and_the_docs_pages_are_checked() -> None:
    assert PAGES[0].exists() and len(PAGES) > 1, PAGES
    assert sum(len(links(page)) for page in PAGES) > 0


def test_every_relative_link_and_anchor_resolves() -> None:
    broken = broken_links(PAGES, ROOT)
    assert not broken, "broken links:\n" + "\n".join(broken)


@pytest.mark.parametrize(("heading", "expected"), [
    ("`make bench-e2e`: how cost grows (not in CI)", "make-bench-e2e-how-cost-grows-not-in-ci"),
    ("Compaction, measured (`make demo`)", "compaction-measured-make-demo"),
    ("The chart's values", "the-charts-values"),
    ("What `helm uninstall` leaves", "what-helm-uninstall-leaves"),
    ("Resource policies: StaticPolicy and ClusterStaticPolicy",
     "resource-policies-staticpolicy-and-clusterstaticpolicy"),
    ("snake_case and-dash, 2 × 3", "snake_case-and-dash-2--3"),
    ("See [the docs](docs/x.md)", "see-the-docs"),
])
def test_anchors_follow_githubs_rule(heading: str, expected: str) -> None:
    assert anchor(heading) == expected


def test_each_broken_link_is_named_and_nothing_else(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "b.md").write_text("# B\n\n## Usage\n\n## Usage\n")
    (tmp_path / "code.py").write_text("")
    page = tmp_path / "README.md"
    page.write_text("\n".join([
        "# Top",
        "[ok](docs/b.md) [ok](docs/b.md#usage-1) [ok](#top) [ok](docs/) [ok](code.py#L3)",
        "[ext](https://example.com/x#y) `[code](missing.md)` ![img](docs/b.md)",
        "```",
        "[fenced](missing.md)",
        "```",
        "[gone](missing.md) [bad anchor](docs/b.md#usage-2) [self](#nowhere)",
        "[ref]: docs/nothing.md",
        "a link whose text runs over [two",
        "lines](docs/b.md#nothing), and `a code span over [two",
        "lines](missing.md)`",
    ]) + "\n")
    assert broken_links([page], tmp_path) == [
        "README.md:7: missing.md: no such file",
        "README.md:7: docs/b.md#usage-2: no heading of b.md makes #usage-2",
        "README.md:7: #nowhere: no heading of README.md makes #nowhere",
        "README.md:8: docs/nothing.md: no such file",
        "README.md:9: docs/b.md#nothing: no heading of b.md makes #nothing",
    ]
