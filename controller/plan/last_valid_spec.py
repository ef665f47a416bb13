"""A policy whose spec turned invalid acts on its last valid one. Pure.

A bad edit must never tear down what a policy set up: its labels, scheduler and descheduler
would go with a policy that stopped acting. So while a policy is valid its status keeps its
spec as the last valid one (with its generation); once an edit makes it invalid, the reader
parses that kept spec back (``PolicyInfo.acting``), the pass acts on it, and this says so:
the ``Valid`` condition names the kept generation, and an Event goes out once per bad
generation.
"""

from __future__ import annotations

import datetime
from typing import Any

from controller.plan.actions import Action
from controller.plan.between_passes import Memory
from controller.plan.events import namespaced_event
from controller.plan.status import Condition, kept_conditions
from controller.snapshot.policies import LAST_VALID_GENERATION, LAST_VALID_SPEC, PolicyInfo


def status_fields(obj: PolicyInfo) -> dict[str, Any]:
    """The status fields that keep the last valid spec: this spec while it is valid, else
    the one kept."""
    valid = obj.policy is not None
    return {LAST_VALID_SPEC: dict(obj.spec) if valid else obj.status.get(LAST_VALID_SPEC),
            LAST_VALID_GENERATION: obj.generation if valid else obj.last_valid_generation}


def kept(obj: PolicyInfo, memory: Memory, now: datetime.datetime
         ) -> tuple[Condition, list[Action]]:
    """For a policy acting on its last valid spec: its ``Valid`` condition, and the Event
    about this bad generation unless one went out recently."""
    condition = kept_conditions(obj.problems, obj.last_valid_generation)
    key = f"invalid/{obj.key}/{obj.generation}"
    if memory.recently(key, now):
        return condition, []
    text = f"spec of generation {obj.generation} is invalid: {condition.message}"
    return condition, [namespaced_event(obj.kind, obj.namespace, obj.name, obj.uid,
                                        "InvalidSpecIgnored", text, "Warning", key)]
