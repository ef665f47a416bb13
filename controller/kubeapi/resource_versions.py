"""Which of two resourceVersions of one resource is the later. Pure.

Since Kubernetes 1.35 (KEP-5504, stable) the API server's resourceVersions are comparable
between objects of the same resource: positive decimal integers without leading zeros, of any
length. A server that breaks that rule gives versions this cannot order; the caller then
trusts what arrived last.
"""

from __future__ import annotations


def compare(a: str, b: str) -> int | None:
    """-1, 0 or 1 as ``a`` is before, the same as or after ``b``; None when either is not
    such an integer."""
    if not _valid(a) or not _valid(b):
        return None
    if len(a) != len(b):
        return -1 if len(a) < len(b) else 1
    return (a > b) - (a < b)


def newer(candidate: str, held: str) -> bool:
    """``candidate`` is a later version than ``held``, or the two cannot be ordered."""
    order = compare(candidate, held)
    return order is None or order > 0


def _valid(version: str) -> bool:
    return version.isascii() and version.isdigit() and version[0] != "0"
