"""Ordering resourceVersions as KEP-5504 allows: integers of any length, compared exactly."""

from __future__ import annotations

import pytest

from controller.kubeapi.resource_versions import compare, newer


@pytest.mark.parametrize(("a", "b", "order"), [
    ("9", "10", -1), ("10", "9", 1), ("123", "123", 0),
    ("99999999999999999999", "100000000000000000000", -1),  # beyond 64 bits
    ("", "1", None), ("01", "1", None), ("1a", "1", None), ("0", "1", None),
])
def test_versions_compare_as_integers_or_not_at_all(a: str, b: str, order: int | None) -> None:
    assert compare(a, b) == order


def test_a_version_that_cannot_be_ordered_is_taken_as_newer() -> None:
    assert newer("11", "10") and not newer("10", "10") and not newer("9", "10")
    assert newer("opaque", "10")
