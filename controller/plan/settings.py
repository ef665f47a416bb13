"""What one pass decides with: the settings of ``plan``, each with its default."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from compaction import names
from controller.components.pod_settings import RuntimeSettings
from controller.drain_planner.drain_plan import DRAIN_TIMEOUT
from controller.plan import runtime_hook
from controller.plan.scheduler_routing import DOWN_AFTER, RECOVERY, STRANDED_AFTER


@dataclass(frozen=True)
class PlanSettings:
    runtime: RuntimeSettings
    namespace: str = names.INSTALL_NAMESPACE
    intent_grace: datetime.timedelta = runtime_hook.INTENT_GRACE
    drain_timeout: datetime.timedelta = DRAIN_TIMEOUT
    # Create the default PolicyEvaluation when the cluster has none.
    default_evaluation: bool = True
    # Schedulers a Pod keeps when it names one (the webhook's setting of the same name).
    exempt_schedulers: frozenset[str] = names.EXEMPT_SCHEDULERS
    # The compaction scheduler's health (controller.plan.scheduler_routing): without an available
    # replica this long, new Pods go to the default scheduler; back to it once available
    # this long; Pods left Pending on it this long while it is down are replaced.
    scheduler_down_after: datetime.timedelta = DOWN_AFTER
    scheduler_recovery: datetime.timedelta = RECOVERY
    stranded_after: datetime.timedelta = STRANDED_AFTER

    @property
    def protected_namespaces(self) -> frozenset[str]:
        """kube-system and the install namespace: no Pod there is patched or evicted."""
        return names.protected_namespaces(self.namespace)
