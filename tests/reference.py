"""The reference documents' example policies, loaded for tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).parent / "data"


def reference_policies() -> dict[str, dict[str, Any]]:
    docs = yaml.safe_load_all((DATA / "reference-policies.yaml").read_text())
    return {d["metadata"]["name"]: d for d in docs}
