"""The reference documents' example policies, loaded for tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).parent / "data"


def reference_policies() -> dict[str, dict[str, Any]]:
    docs = yaml.safe_load_all((DATA / "reference-policies.yaml").read_text())
    return {d["metadata"]["name"]: d for d in docs}


def reference_policy_evaluation() -> dict[str, Any]:
    """The reference's complete default PolicyEvaluation, with only apiVersion changed."""
    doc: dict[str, Any] = yaml.safe_load((DATA / "reference-policy-evaluation.yaml").read_text())
    return doc
