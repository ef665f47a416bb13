"""The metrics docs/observability.md documents, read from its metric tables
(``| metric | type | labels |``), so that a test can ask Prometheus for each one, including
those documented later."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

PAGE = Path(__file__).resolve().parent.parent / "docs" / "observability.md"
_HEADER = re.compile(r"^\|\s*metric\s*\|\s*type\s*\|\s*labels\s*\|\s*$")
_NAME = re.compile(r"^`([a-zA-Z_:][a-zA-Z0-9_:]*)`$")
_LABELS = re.compile(r"^\s*`([a-z_][a-z0-9_]*)`(?:\s*,\s*`([a-z_][a-z0-9_]*)`)*")
_LABEL = re.compile(r"`([a-z_][a-z0-9_]*)`")
_VALUE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


@dataclass(frozen=True)
class DocumentedMetric:
    name: str
    type: str  # counter, gauge or histogram
    labels: tuple[str, ...] = ()
    # Documented values of the last label listed before " = " (e.g. outcome = patched, ...).
    values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse_labels(cell: str) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """```kind`, `reason` = expired (relisted after 410), error`` -> (kind, reason), reason's
    values. Only the backticked names that open the cell are labels; prose has none."""
    m = _LABELS.match(cell)
    if not m:
        return (), {}
    labels = tuple(_LABEL.findall(m.group(0)))
    rest = cell[m.end():].strip()
    values: dict[str, tuple[str, ...]] = {}
    if rest.startswith("="):
        text = re.sub(r"\([^)]*\)", "", rest[1:])
        values[labels[-1]] = tuple(v.strip() for v in text.split(",")
                                   if _VALUE.match(v.strip()))
    return labels, values


def documented_metrics(page: Path = PAGE) -> list[DocumentedMetric]:
    out: list[DocumentedMetric] = []
    in_table = False
    for line in page.read_text().splitlines():
        if _HEADER.match(line):
            in_table = True
            continue
        if not in_table:
            continue
        if not line.startswith("|"):
            in_table = False
            continue
        cells = _cells(line)
        if len(cells) < 3 or set(cells[0]) <= {"-", " ", ":"}:
            continue
        name = _NAME.match(cells[0])
        if not name:
            raise ValueError(f"{page.name}: metric table row without a `metric_name`: {line}")
        kind = cells[1].split(",")[0].split()[0].lower()
        if kind not in ("counter", "gauge", "histogram"):
            raise ValueError(f"{page.name}: metric {name.group(1)}: unknown type {cells[1]!r}")
        labels, values = parse_labels(cells[2])
        out.append(DocumentedMetric(name.group(1), kind, labels, values))
    return out
