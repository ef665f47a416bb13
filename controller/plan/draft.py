"""The plan as a pass builds it, frozen into a ``Plan`` at the end."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from controller.plan.actions import Action


@dataclass
class Draft:
    """The actions and counts a pass has decided so far."""

    actions: list[Action] = field(default_factory=list)
    managed: Counter[str] = field(default_factory=Counter)
    suppressed: int = 0
    suppressions: int = 0
    skipped: int = 0
    selections: list[str] = field(default_factory=list)
