"""What the simulation judges of a Pod's scheduling constraints, and what it leaves alone: each
preference the compaction scheduler scores can outweigh MostAllocated, so a Pod with one is
not simulated (it blocks its node) rather than guessed at."""

from __future__ import annotations

from typing import Any

import pytest

from controller.snapshot.constraints import UNCONSTRAINED, parse_constraints

_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
_TERM = [{"weight": 10, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                            "labelSelector": {"matchLabels": {"app": "web"}}}}]


@pytest.mark.parametrize(("spec", "unsimulated"), [
    ({}, ""),
    ({"tolerations": [{"key": "x", "operator": "Exists"}]}, ""),
    ({"affinity": {"nodeAffinity": {_PREFERRED: [{"weight": 1, "preference": {
        "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}]}}},
     "preferred node affinity"),
    ({"affinity": {"podAffinity": {_PREFERRED: _TERM}}}, "preferred pod affinity"),
    ({"affinity": {"podAntiAffinity": {_PREFERRED: _TERM}}}, "preferred pod anti-affinity"),
    ({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                     "whenUnsatisfiable": "ScheduleAnyway"}]},
     "topology spread on zone (ScheduleAnyway)"),
    # A constraint the scheduler filters by names itself first.
    ({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone"}],
      "affinity": {"podAntiAffinity": {_PREFERRED: _TERM}}},
     "topology spread on zone (DoNotSchedule)"),
], ids=["none", "tolerations", "node-preference", "pod-affinity-preference",
        "pod-anti-affinity-preference", "spread-anyway", "a-filter-first"])
def test_preferences_the_profile_scores_are_not_simulated(spec: dict[str, Any],
                                                         unsimulated: str) -> None:
    parsed = parse_constraints(spec)
    assert parsed.unsimulated == unsimulated
    if not spec:
        assert parsed is UNCONSTRAINED
