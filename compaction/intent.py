"""The versioned ``compactor.dev/intent`` annotation: the controller writes it, the webhook reads.

Compact JSON with a stable key order, e.g.::

    {"v":1,"policy":"p","schedulerName":"compactor-scheduler",
     "labels":{"compactor.dev/policy":"p","compactor.dev/workload-kind":"Deployment"},
     "hash":"<12 hex>"}

``hash`` is the first 12 hex digits of the SHA-256 of the same JSON without ``hash``; it lets
the controller compare a Pod's admitted state with the workload's current intent cheaply.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

import orjson

from compaction import names
from compaction.policy import Policy, SchedulerMode
from compaction.workload import WorkloadType

VERSION: Final = 1


@dataclass(frozen=True)
class Intent:
    policy: str
    labels: Mapping[str, str] = field(default_factory=dict)
    scheduler_name: str | None = None

    def _body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"v": VERSION, "policy": self.policy}
        if self.scheduler_name:
            body["schedulerName"] = self.scheduler_name
        body["labels"] = dict(sorted(self.labels.items()))
        return body

    @property
    def hash(self) -> str:
        return hashlib.sha256(orjson.dumps(self._body())).hexdigest()[:12]

    def render(self) -> str:
        return self._rendered

    @functools.cached_property
    def _rendered(self) -> str:  # one intent is written onto thousands of Pods in a pass
        body = self._body()
        body["hash"] = hashlib.sha256(orjson.dumps(body)).hexdigest()[:12]
        return orjson.dumps(body).decode()


def intent_for(policy: Policy, kind: WorkloadType, managed_scheduler_up: bool = True
               ) -> Intent:
    """What a workload of ``kind`` under ``policy`` asks of its new Pods: the policy label,
    the workload-kind label the descheduler's eviction selector reads, and the scheduler;
    no scheduler while the managed one cannot schedule (``managed_scheduler_up`` False), so
    that no Pod waits for a scheduler that is not there."""
    scheduler = policy.scheduler.scheduler_name
    if policy.scheduler.mode is SchedulerMode.MANAGED and not managed_scheduler_up:
        scheduler = None
    return Intent(
        policy=policy.id,
        labels={names.POLICY_LABEL: policy.id, names.WORKLOAD_KIND_LABEL: kind.value},
        scheduler_name=scheduler,
    )


class IntentError(StrEnum):
    """Why an annotation could not be used (values are metric label values)."""

    MALFORMED = "malformed"
    UNKNOWN_VERSION = "unknown_version"
    HASH_MISMATCH = "hash_mismatch"


@dataclass(frozen=True)
class ParsedIntent:
    intent: Intent | None
    error: IntentError | None = None
    detail: str = ""


def load_versioned(text: str | bytes, version: int
                   ) -> tuple[dict[str, Any], None, str] | tuple[None, IntentError, str]:
    """A versioned annotation's JSON object, or why it is not one (never raises)."""
    try:
        raw = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        return None, IntentError.MALFORMED, f"not JSON: {e}"
    if not isinstance(raw, dict):
        return None, IntentError.MALFORMED, "not a JSON object"
    if raw.get("v") != version:
        return None, IntentError.UNKNOWN_VERSION, f"version {raw.get('v')!r}"
    return raw, None, ""


def parse_intent(text: str | bytes) -> ParsedIntent:
    """Read an annotation value; never raises, every failure is reported in ``error``."""
    raw, error, detail = load_versioned(text, VERSION)
    if raw is None:
        return ParsedIntent(None, error, detail)
    policy, labels, sched = raw.get("policy"), raw.get("labels", {}), raw.get("schedulerName")
    if not isinstance(policy, str) or not policy:
        return ParsedIntent(None, IntentError.MALFORMED, "policy must be a non-empty string")
    if not isinstance(labels, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        return ParsedIntent(None, IntentError.MALFORMED, "labels must map strings to strings")
    if sched is not None and (not isinstance(sched, str) or not sched):
        return ParsedIntent(None, IntentError.MALFORMED, "schedulerName must be a string")
    intent = Intent(policy=policy, labels=labels, scheduler_name=sched)
    if raw.get("hash") != intent.hash:
        return ParsedIntent(None, IntentError.HASH_MISMATCH,
                            f"hash {raw.get('hash')!r} != {intent.hash!r}")
    return ParsedIntent(intent)


def parse_exempt_schedulers(text: str) -> frozenset[str]:
    """A comma-separated list of scheduler names (the settings' form); blanks dropped, so an
    empty text exempts none."""
    return frozenset(part.strip() for part in text.split(",") if part.strip())


def keeps_scheduler(scheduler_name: str | None, wanted: str | None,
                    exempt: frozenset[str]) -> bool:
    """Whether a Pod that names ``scheduler_name`` keeps it under an intent that wants
    ``wanted``: it names the wanted one already, or an exempt one (a GPU scheduler such as
    KAI takes precedence). One rule for the webhook's patch and the controller's view of a
    Pod's compliance, so the runtime hook never replaces a Pod admission would admit again
    the same way."""
    return wanted is None or scheduler_name == wanted or scheduler_name in exempt
