"""Fields of API objects as they arrive: plain dicts, where any field may be missing. Pure.

The only place that reads raw objects field by field; everything past the reader works on
the frozen records built from them.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

Obj = dict[str, Any]
# Kinds whose spec changes bump metadata.generation; a ConfigMap has only resourceVersion.
_GENERATION_KINDS = frozenset({"Deployment", "CronJob"})


# ``type(v) is dict`` first: decoded JSON is plain dicts, and ``isinstance(v, Mapping)`` (an
# ABC check) costs a tenth of parsing a listed Pod.

def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if type(value) is dict or isinstance(value, Mapping) else {}


def section(obj: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = obj.get(name)
    return value if type(value) is dict or isinstance(value, Mapping) else {}


def str_map(raw: Any) -> Mapping[str, str]:
    if not (type(raw) is dict or isinstance(raw, Mapping)):
        return {}
    return {str(k): str(v) for k, v in raw.items()}


def parse_time(text: Any) -> datetime.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def format_time(t: datetime.datetime) -> str:
    """The API's timestamp form (RFC 3339 in UTC, whole seconds), the inverse of
    ``parse_time``."""
    return t.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def controller_of(metadata: Mapping[str, Any]) -> tuple[str, str] | None:
    """(kind, name) of the controller owner reference, if any."""
    for ref in metadata.get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller"):
            return str(ref.get("kind", "")), str(ref.get("name", ""))
    return None


def revision(kind: str, obj: Mapping[str, Any]) -> str:
    """What changes when someone changes the object's desired state (not its status)."""
    m = meta(obj)
    if kind in _GENERATION_KINDS:
        return f"g{m.get('generation') or 0}"
    return f"r{m.get('resourceVersion') or ''}"
