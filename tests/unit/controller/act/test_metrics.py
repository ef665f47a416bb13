"""The planner's gauges are the plan: what ``show_plans`` exports equals what the plans hold,
per policy and per first reason, and a policy that is gone leaves no series."""

from __future__ import annotations

from controller.act.metrics import ControllerMetrics
from controller.drain_planner.drain_plan import DrainPlan, Unremovable
from controller.drain_planner.reasons import Code, Reason

PDB = Reason(Code.PDB, "PodDisruptionBudget shop/web allows 0 disruptions")
FIT = Reason(Code.DOES_NOT_FIT, "pod shop/x does not fit elsewhere: cpu 600m")


def _value(metrics: ControllerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_the_gauges_hold_what_the_plans_say() -> None:
    m = ControllerMetrics()
    prod = DrainPlan("prod", nodes_in_use=("a", "b", "c", "d"), freeable=("c", "d"),
                     draining=("d",),
                     abandoned=(Unremovable("e", (FIT,)),),
                     unremovable=(Unremovable("a", (PDB, FIT)), Unremovable("b", (PDB,))))
    batch = DrainPlan("batch", nodes_in_use=("x",))
    m.show_plans([prod, batch])
    assert _value(m, "compactor_plan_nodes_in_use", policy="prod") == 4
    assert _value(m, "compactor_plan_freeable_nodes", policy="prod") == 2
    assert _value(m, "compactor_nodes_draining", policy="prod") == 1
    # Counted by each node's first reason: two budgets, one node that no longer fits.
    assert _value(m, "compactor_nodes_unremovable", policy="prod", reason="pdb") == 2
    assert _value(m, "compactor_nodes_unremovable", policy="prod", reason="does_not_fit") == 1
    assert _value(m, "compactor_plan_nodes_in_use", policy="batch") == 1
    assert _value(m, "compactor_plan_freeable_nodes", policy="batch") == 0

    m.show_plans([batch])  # prod was deleted
    for name in ("compactor_plan_nodes_in_use", "compactor_plan_freeable_nodes",
                 "compactor_nodes_draining"):
        assert _value(m, name, policy="prod") is None
    assert _value(m, "compactor_nodes_unremovable", policy="prod", reason="pdb") is None
    assert _value(m, "compactor_plan_nodes_in_use", policy="batch") == 1
