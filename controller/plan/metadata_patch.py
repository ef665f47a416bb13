"""The merge patch that brings an object's labels and annotations to what they should be."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Wanted = Mapping[str, str | None]  # None: the key must be absent


def metadata_patch(labels: Mapping[str, str], annotations: Mapping[str, str],
                   want_labels: Wanted, want_annotations: Wanted) -> dict[str, Any] | None:
    """Only the keys that differ; None when the object already matches."""
    meta: dict[str, Any] = {}
    for field, current, wanted in (("labels", labels, want_labels),
                                   ("annotations", annotations, want_annotations)):
        diff = {k: v for k, v in wanted.items() if current.get(k) != v}
        if diff:
            meta[field] = diff
    return {"metadata": meta} if meta else None
