"""One admission decision: skip rules, owner resolution, patch, and every way it can fail open.

The admitter owns the whole verdict: the request's time budget, and which exception means
which outcome (``webhook.errors``). The endpoint only reads the body and times the answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from enum import StrEnum
from typing import Any, Final, NamedTuple

from compaction import names
from compaction.safety import Hold, untouched
from compaction.scope import opted_out
from webhook.errors import AdmittedUnchanged, OptedOut
from webhook.metrics import Metrics
from webhook.owners import OwnerCache
from webhook.patch import build_pod_patch
from webhook.review import AdmissionRequest, PodView, is_pod_create, pod_view

log = logging.getLogger("compactor.webhook")


class Outcome(StrEnum):
    PATCHED = "patched"
    UNCHANGED = "unchanged"
    SKIPPED = "skipped"
    FAILED_OPEN = "failed_open"


class Decision(NamedTuple):
    """One per admission, hence a NamedTuple (cheaper to build than a frozen dataclass)."""

    outcome: Outcome
    patch: list[dict[str, Any]] | None = None
    reason: str = ""


_SKIPPED: Final = {Hold.PROTECTED_NAMESPACE: "namespace {ns}", Hold.MIRROR: "mirror pod",
                   Hold.PLACEHOLDER: "placeholder priority"}


def skip_reason(pod: PodView, protected: frozenset[str] = names.PROTECTED_NAMESPACES
                ) -> str | None:
    """Why this Pod is never mutated, judged on the request alone (no lookups): the rule of
    ``compaction.safety.untouched``, an opt-out, or no owner to read intent from."""
    hold = untouched(pod.namespace, pod.is_mirror, pod.priority, protected)
    if hold is not None:
        return _SKIPPED[hold].format(ns=pod.namespace)
    if opted_out(pod.labels):
        return "pod opted out"
    if pod.controller is None:
        return "no controller owner"
    return None


class Admitter:
    def __init__(self, owners: OwnerCache, metrics: Metrics, budget_seconds: float = 2.0,
                 limit_ranges: Callable[[str], str | None] = lambda _: None,
                 exempt_schedulers: frozenset[str] = names.EXEMPT_SCHEDULERS,
                 protected: frozenset[str] = names.PROTECTED_NAMESPACES) -> None:
        self.owners = owners
        # Namespaces whose Pods are never mutated (names.protected_namespaces).
        self.protected = protected
        # Schedulers a Pod that already names one keeps (compaction.intent.keeps_scheduler).
        self.exempt_schedulers = exempt_schedulers
        self.metrics = metrics
        self.budget_seconds = budget_seconds
        # A namespace's LimitRanges fingerprint as the watch shows it; None when unknown.
        self.limit_ranges = limit_ranges
        self._outcomes = {o: metrics.requests.labels(o.value) for o in Outcome}

    async def decide(self, request: AdmissionRequest) -> Decision:
        """The verdict for one request, within its budget; never raises.

        The budget is a deadline handed to the owner lookups, the only steps that wait (for
        the API server): a warm admission, answered from the watch feed or the cache, never
        waits, so it arms no timer at all."""
        deadline = asyncio.get_running_loop().time() + self.budget_seconds
        try:
            decision = await self._decide(request, deadline)
        except TimeoutError:
            decision = Decision(Outcome.FAILED_OPEN, reason="timeout")
        except AdmittedUnchanged as e:
            log.warning("admitting %s unchanged (%s): %s", request["uid"], e.reason, e)
            decision = Decision(Outcome.FAILED_OPEN, reason=e.reason)
        except Exception:
            log.exception("internal error, admitting %s unchanged", request["uid"])
            decision = Decision(Outcome.FAILED_OPEN, reason="internal")
        if decision.outcome is Outcome.FAILED_OPEN:
            self.metrics.failures.labels(decision.reason).inc()
        self._outcomes[decision.outcome].inc()
        return decision

    async def _decide(self, request: AdmissionRequest, deadline: float) -> Decision:
        # Dry-run requests get the same answer: the webhook has no side effects to skip.
        if not is_pod_create(request):
            return Decision(Outcome.SKIPPED, reason="not a Pod CREATE")
        pod = pod_view(request)
        reason = skip_reason(pod, self.protected)
        if reason:
            return Decision(Outcome.SKIPPED, reason=reason)
        if (await self.owners.namespace(pod.namespace, deadline)).ignored:
            return Decision(Outcome.SKIPPED, reason="namespace opted out")
        try:
            found = await self.owners.resolve(pod.namespace, pod.controller, deadline)
        except OptedOut as e:
            return Decision(Outcome.SKIPPED, reason=f"owner opted out: {e}")
        if found is None:
            return Decision(Outcome.UNCHANGED, reason="no workload intent")
        patch = build_pod_patch(
            pod, found.intent, found.rendered, found.resources,
            self.limit_ranges(pod.namespace) if found.resources is not None else None,
            self.exempt_schedulers)
        if patch.kept_scheduler and found.intent is not None:
            self.metrics.gpu_overrides.labels(patch.kept_scheduler).inc()
            log.info("pod %s/%s keeps scheduler %s over %s (intent of %s/%s)",
                     pod.namespace, pod.name, patch.kept_scheduler,
                     found.intent.scheduler_name, found.owner_kind, found.owner_name)
        if patch.resources is not None:
            self.metrics.resource_patch_outcomes[patch.resources].inc()
            if patch.resources not in ("applied", "unchanged"):
                log.info("pod %s/%s admitted with its own resources (%s; plan of %s/%s)",
                         pod.namespace, pod.name, patch.resources, found.owner_kind,
                         found.owner_name)
        if not patch.ops:
            return Decision(Outcome.UNCHANGED, reason="already compliant")
        return Decision(Outcome.PATCHED, patch.ops)
