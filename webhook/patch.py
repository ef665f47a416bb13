"""The JSONPatch (RFC 6902) that gives a new Pod its compaction state and its resource plan.
Pure."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

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
             wanted: Mapping[str, str], present: bool) -> None:
    changes = {k: v for k, v in wanted.items() if current.get(k) != v}
    if not changes:
        return
    if not present:
        ops.append({"op": "add", "path": parent, "value": changes})
        return
    for key, value in changes.items():
        op = "replace" if key in current else "add"
        ops.append({"op": op, "path": f"{parent}/{escape(key)}", "value": value})


def build_patch(pod: PodView, intent: Intent, rendered: str,
                exempt: frozenset[str] = names.EXEMPT_SCHEDULERS) -> PatchPlan:
    """Labels, the intent marker annotation and ``spec.schedulerName``; empty when already set.

    ``rendered`` is the intent's canonical annotation text (``Intent.render()``), which the
    controller later compares with the workload's to see whether the Pod has converged.
    A Pod that already names one of the ``exempt`` schedulers keeps it; any other scheduler
    is replaced by the intent's (``compaction.intent.keeps_scheduler``).
    """
    ops: list[dict[str, Any]] = []
    _set_map(ops, "/metadata/labels", pod.labels, intent.labels, pod.has_labels)
    _set_map(ops, "/metadata/annotations", pod.annotations,
             {names.INTENT_ANNOTATION: rendered}, pod.has_annotations)
    kept: str | None = None
    wanted = intent.scheduler_name
    if not keeps_scheduler(pod.scheduler_name, wanted, exempt):
        op = "replace" if pod.scheduler_name else "add"
        ops.append({"op": op, "path": "/spec/schedulerName", "value": wanted})
    elif wanted and pod.scheduler_name != wanted:
        kept = pod.scheduler_name
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


def resource_patch(pod: PodView, plan: ResourcePlan, limit_ranges: str | None,
                   annotations_present: bool) -> ResourcePatch:
    """The containers' resources as the plan sets them, plus the plan's hash on the Pod; no
    operation at all when the result would be a Pod the API server refuses (the Pod is then
    admitted with what it asked for), or when the namespace's LimitRanges are not the ones
    the controller checked the plan against (``limit_ranges``: the fingerprint the watch
    shows now, None when unknown). ``annotations_present``: whether the Pod has an annotation
    map once the operations before these have run."""
    if limit_ranges is None or limit_ranges != plan.limit_ranges:
        return ResourcePatch([], "limit_ranges_changed" if limit_ranges is not None
                             else "limit_ranges_unknown")
    containers = pod.containers()
    if containers is None:
        return ResourcePatch([], "unpatchable")
    ops: list[dict[str, Any]] = []
    for i, c in enumerate(containers):
        wanted = plan.containers.get(c.name)
        if wanted is None:
            continue
        try:
            requests = {k: _quantity(v) for k, v in {**c.requests, **wanted.requests}.items()}
            limits = {k: _quantity(v) for k, v in {**c.limits, **wanted.limits}.items()}
        except ValueError:
            return ResourcePatch([], "unpatchable")
        if conflicts(requests_defaulted(requests, limits), limits):
            return ResourcePatch([], "conflict")
        base = f"/spec/containers/{i}/resources"
        if not c.has_resources:
            body = {f: dict(wanted.values(f)) for f in FIELDS if wanted.values(f)}
            ops.append({"op": "add", "path": base, "value": body})
            continue
        _set_map(ops, f"{base}/requests", c.requests, wanted.requests, c.has_requests)
        _set_map(ops, f"{base}/limits", c.limits, wanted.limits, c.has_limits)
    outcome = "applied" if ops else "unchanged"
    _set_map(ops, "/metadata/annotations", pod.annotations,
             {names.RESOURCES_HASH_ANNOTATION: plan.hash}, annotations_present)
    return ResourcePatch(ops, outcome)
