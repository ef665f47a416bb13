"""The JSONPatch (RFC 6902) that gives a new Pod its compaction state. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from compaction import names
from compaction.intent import Intent
from webhook.review import PodView


def escape(key: str) -> str:
    """A map key as one JSON-pointer segment: ``~`` → ``~0``, ``/`` → ``~1``."""
    return key.replace("~", "~0").replace("/", "~1")


@dataclass(frozen=True)
class PatchPlan:
    ops: list[dict[str, Any]]
    # The scheduler a Pod already named and kept instead of ours (e.g. kai-scheduler).
    kept_scheduler: str | None = None


def _set_map(ops: list[dict[str, Any]], parent: str, current: dict[str, str],
             wanted: dict[str, str], present: bool) -> None:
    changes = {k: v for k, v in wanted.items() if current.get(k) != v}
    if not changes:
        return
    if not present:
        ops.append({"op": "add", "path": parent, "value": changes})
        return
    for key, value in changes.items():
        op = "replace" if key in current else "add"
        ops.append({"op": op, "path": f"{parent}/{escape(key)}", "value": value})


def build_patch(pod: PodView, intent: Intent, rendered: str) -> PatchPlan:
    """Labels, the intent marker annotation and ``spec.schedulerName``; empty when already set.

    ``rendered`` is the intent's canonical annotation text (``Intent.render()``), which the
    controller later compares with the workload's to see whether the Pod has converged.
    A Pod that already names a scheduler other than the default keeps it.
    """
    ops: list[dict[str, Any]] = []
    _set_map(ops, "/metadata/labels", dict(pod.labels), dict(intent.labels), pod.has_labels)
    _set_map(ops, "/metadata/annotations", dict(pod.annotations),
             {names.INTENT_ANNOTATION: rendered}, pod.has_annotations)
    kept: str | None = None
    wanted = intent.scheduler_name
    if wanted and pod.scheduler_name != wanted:
        if pod.scheduler_name in (None, names.DEFAULT_SCHEDULER):
            op = "replace" if pod.scheduler_name else "add"
            ops.append({"op": op, "path": "/spec/schedulerName", "value": wanted})
        else:
            kept = pod.scheduler_name
    return PatchPlan(ops, kept)
