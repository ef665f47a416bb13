"""One table of reason codes: every code says what it means for a group of nodes, and a Pod
that never moves keeps its ``compaction.safety.Hold`` as its code."""

from __future__ import annotations

from compaction.safety import Hold
from controller.drain_planner.reasons import CAUSES, Code
from tests.metric_tables import documented_metrics


def test_every_code_has_a_cause_and_nothing_else_has_one() -> None:
    assert set(CAUSES) == set(Code)
    assert all(CAUSES[c].strip() for c in Code)


def test_every_hold_is_a_code_of_the_same_value() -> None:
    assert {Code(h.value) for h in Hold} <= set(Code)


def test_the_protected_namespaces_and_the_placeholder_priority_are_named_from_their_source(
        ) -> None:
    # Compactor's own namespace is whichever it runs in, so the cause names no fixed one.
    assert "kube-system" in CAUSES[Code.PROTECTED_NAMESPACE]
    assert "Compactor's own" in CAUSES[Code.PROTECTED_NAMESPACE]
    assert "-10" in CAUSES[Code.PLACEHOLDER]


def test_the_metric_documents_every_code_the_planner_gives() -> None:
    """docs/observability.md lists the reason label's values: every code but those only the
    preview uses (a node it drained, a node no policy's pool holds) and the holds of Pods the
    planner never weighs (mirror Pods never block; placeholders only need room)."""
    (unremovable,) = [m for m in documented_metrics() if m.name == "compactor_nodes_unremovable"]
    assert set(unremovable.values["reason"]) == {c.value for c in Code} - {
        Code.DRAINED.value, Code.NO_POOL.value, Code.MIRROR.value, Code.PLACEHOLDER.value}
