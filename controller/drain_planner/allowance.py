"""What Compactor may still evict now, beyond each Pod's own rule: the workloads' eviction
budgets and the Pods too recently replaced to move again. Pure.

Worked out from the cluster each pass (``controller.plan.eviction_limits``); the planner reads
it so that a plan never marks more of a workload's Pods than its budget has left, nor a Pod
that replaced one of Compactor's evictions only a moment ago.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from controller.drain_planner.reasons import Code, Reason
from controller.snapshot.pod import PodInfo

PodKey = tuple[str, str]  # namespace, name


@dataclass(frozen=True)
class Allowance:
    """``held``: the Pods Compactor may not evict now, each with why: each keeps its node.
    ``waiting``: Pods on a node a drain empties already that replaced an eviction too
    recently: the drain goes on, and they are marked once they may go. ``budget_of``: each Pod
    under an eviction budget that an eviction of it would spend, with its budget's name (its
    workload, as a person reads it); ``left``: the evictions each budget allows now."""

    held: Mapping[PodKey, Reason] = field(default_factory=dict)
    budget_of: Mapping[PodKey, str] = field(default_factory=dict)
    left: Mapping[str, int] = field(default_factory=dict)
    waiting: frozenset[PodKey] = frozenset()

    def digest(self) -> tuple[object, ...]:
        """What a plan read of it, for the plan's reuse."""
        return (tuple(sorted(self.held.items())), tuple(sorted(self.budget_of.items())),
                tuple(sorted(self.left.items())), tuple(sorted(self.waiting)))

    def hold(self, pod: PodInfo) -> Reason | None:
        """Why ``pod`` keeps its node; None when it does not."""
        return self.held.get(pod.key)

    def evictable(self, pod: PodInfo) -> bool:
        """Whether Compactor may evict ``pod`` now, as far as these rules go."""
        return pod.key not in self.held and pod.key not in self.waiting

    def cost(self, movable: Mapping[str, Iterable[PodInfo]]) -> Counter[str]:
        """What evicting ``movable`` (a node's Pods to move, per policy) spends, per budget."""
        if not self.budget_of:
            return Counter()
        return Counter(b for pods in movable.values() for p in pods
                       if (b := self.budget_of.get(p.key)) is not None)

    def over(self, cost: Mapping[str, int], spent: Mapping[str, int]) -> Reason | None:
        """Why ``cost`` more, after ``spent``, goes over a budget; None when it does not."""
        for budget, need in sorted(cost.items()):
            room = self.left.get(budget, 0) - spent.get(budget, 0)
            if need > room:
                return Reason(Code.EVICTION_BUDGET, (
                    f"freeing the node takes {need} evictions of {budget}, whose eviction "
                    f"budget allows {max(room, 0)} more now"))
        return None


NONE = Allowance()
