"""The JSONPatch (RFC 6902) that gives a new Pod its compaction state and its resource plan.
Pure.

``build_pod_patch`` is the admission's one call: the intent's operations, then the resource
plan's, which must know whether the intent's created the annotation map. ``build_patch`` and
``resource_patch`` are each half on its own.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple

from compaction import names
from compaction.intent import Intent, keeps_scheduler
from compaction.limit_range import requests_defaulted
from compaction.quantity import parse_quantity
from compaction.resource_plan import ResourcePlan, conflicts
from compaction.static_policy import FIELDS
from webhook.review import PodView


def escape(key: str) -> str:
    """A map key as one JSON-pointer segment: ``~`` → ``~0``, ``/`` → ``~1``."""
    return key.replace("~", "~0").replace("/", "~1")


@dataclass(frozen=True)
class PatchPlan:
    ops: list[dict[str, Any]]
    # The scheduler a Pod already named and kept instead of ours (e.g. kai-scheduler).
    kept_scheduler: str | None = None


def _set_map(ops: list[dict[str, Any]], parent: str, current: Mapping[str, str],
             wanted: Mapping[str, str], present: bool) -> bool:
    """Whether the map exists once ``ops`` have run."""
    changes = {k: v for k, v in wanted.items() if current.get(k) != v}
    if not changes:
        return present
    if not present:
        ops.append({"op": "add", "path": parent, "value": changes})
        return True
    for key, value in changes.items():
        op = "replace" if key in current else "add"
        ops.append({"op": op, "path": f"{parent}/{escape(key)}", "value": value})
    return True


def _intent_marks(ops: list[dict[str, Any]], pod: PodView, intent: Intent, rendered: str
                  ) -> bool:
    """The labels and the intent marker annotation; whether the annotation map exists after."""
    _set_map(ops, "/metadata/labels", pod.labels, intent.labels, pod.has_labels)
    return _set_map(ops, "/metadata/annotations", pod.annotations,
                    {names.INTENT_ANNOTATION: rendered}, pod.has_annotations)


def _scheduler(ops: list[dict[str, Any]], pod: PodView, wanted: str | None,
               exempt: frozenset[str]) -> str | None:
    """``spec.schedulerName``; the scheduler the Pod keeps instead of ``wanted``, if any."""
    if not keeps_scheduler(pod.scheduler_name, wanted, exempt):
        op = "replace" if pod.scheduler_name else "add"
        ops.append({"op": op, "path": "/spec/schedulerName", "value": wanted})
    elif wanted and pod.scheduler_name != wanted:
        return pod.scheduler_name
    return None


def build_patch(pod: PodView, intent: Intent, rendered: str,
                exempt: frozenset[str] = names.EXEMPT_SCHEDULERS) -> PatchPlan:
    """Labels, the intent marker annotation and ``spec.schedulerName``; empty when already set.

    ``rendered`` is the intent's canonical annotation text (``Intent.render()``), which the
    controller later compares with the workload's to see whether the Pod has converged.
    A Pod that already names one of the ``exempt`` schedulers keeps it; any other scheduler
    is replaced by the intent's (``compaction.intent.keeps_scheduler``).
    """
    ops: list[dict[str, Any]] = []
    _intent_marks(ops, pod, intent, rendered)
    kept = _scheduler(ops, pod, intent.scheduler_name, exempt)
    return PatchPlan(ops, kept)


@dataclass(frozen=True)
class ResourcePatch:
    ops: list[dict[str, Any]]
    outcome: str  # applied, unchanged, or why it was left out (a metric label value)


# A quantity this long is no Pod's real value: parsed every time rather than held.
_MEMO_QUANTITY_CHARS = 32


@functools.lru_cache(maxsize=1024)
def _memo_quantity(text: str) -> Fraction:
    return parse_quantity(text)


def _quantity(text: str) -> Fraction:
    """``parse_quantity``, which a workload's Pods ask of the same few values: parsed once
    (a bounded memo of short texts; a text that does not parse raises every time)."""
    return _memo_quantity(text) if len(text) <= _MEMO_QUANTITY_CHARS else parse_quantity(text)


def _resources(ops: list[dict[str, Any]], pod: PodView, plan: ResourcePlan,
               limit_ranges: str | None, annotations_present: bool) -> str:
    """Appends the plan's operations to ``ops`` and says how it went (``ResourcePatch``'s
    outcome); appends none unless it is applied or unchanged."""
    if limit_ranges is None or limit_ranges != plan.limit_ranges:
        return ("limit_ranges_changed" if limit_ranges is not None
                else "limit_ranges_unknown")
    containers = pod.containers()
    if containers is None:
        return "unpatchable"
    start = len(ops)
    for i, c in enumerate(containers):
        wanted = plan.containers.get(c.name)
        if wanted is None:
            continue
        try:
            requests = {k: _quantity(v) for k, v in {**c.requests, **wanted.requests}.items()}
            limits = {k: _quantity(v) for k, v in {**c.limits, **wanted.limits}.items()}
        except ValueError:
            del ops[start:]
            return "unpatchable"
        if conflicts(requests_defaulted(requests, limits), limits):
            del ops[start:]
            return "conflict"
        base = f"/spec/containers/{i}/resources"
        if not c.has_resources:
            body = {f: dict(wanted.values(f)) for f in FIELDS if wanted.values(f)}
            ops.append({"op": "add", "path": base, "value": body})
            continue
        _set_map(ops, f"{base}/requests", c.requests, wanted.requests, c.has_requests)
        _set_map(ops, f"{base}/limits", c.limits, wanted.limits, c.has_limits)
    outcome = "applied" if len(ops) > start else "unchanged"
    _set_map(ops, "/metadata/annotations", pod.annotations,
             {names.RESOURCES_HASH_ANNOTATION: plan.hash}, annotations_present)
    return outcome


def resource_patch(pod: PodView, plan: ResourcePlan, limit_ranges: str | None,
                   annotations_present: bool) -> ResourcePatch:
    """The containers' resources as the plan sets them, plus the plan's hash on the Pod; no
    operation at all when the result would be a Pod the API server refuses (the Pod is then
    admitted with what it asked for), or when the namespace's LimitRanges are not the ones
    the controller checked the plan against (``limit_ranges``: the fingerprint the watch
    shows now, None when unknown). ``annotations_present``: whether the Pod has an annotation
    map once the operations before these have run."""
    ops: list[dict[str, Any]] = []
    outcome = _resources(ops, pod, plan, limit_ranges, annotations_present)
    return ResourcePatch(ops, outcome)


class PodPatch(NamedTuple):
    """One per admission, hence a NamedTuple (cheaper to build than a frozen dataclass)."""

    ops: list[dict[str, Any]]
    # The scheduler a Pod already named and kept instead of the intent's (``PatchPlan``).
    kept_scheduler: str | None = None
    # How the resource plan went (``ResourcePatch.outcome``); None when there is no plan.
    resources: str | None = None


def build_pod_patch(pod: PodView, intent: Intent | None, rendered: str | None,
                    plan: ResourcePlan | None, limit_ranges: str | None,
                    exempt: frozenset[str] = names.EXEMPT_SCHEDULERS) -> PodPatch:
    """The whole patch of an admission: ``build_patch``'s operations when there is an intent
    (and its ``rendered`` text), then ``resource_patch``'s when there is a ``plan``, on the
    annotation map as the first left it. The operations are the two patches' in that order."""
    ops: list[dict[str, Any]] = []
    kept: str | None = None
    annotations = pod.has_annotations
    if intent is not None and rendered is not None:
        annotations = _intent_marks(ops, pod, intent, rendered)
        kept = _scheduler(ops, pod, intent.scheduler_name, exempt)
    if plan is None:
        return PodPatch(ops, kept)
    return PodPatch(ops, kept, _resources(ops, pod, plan, limit_ranges, annotations))
