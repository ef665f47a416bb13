"""``PolicyEvaluation``: the cluster-scoped singleton that ranks policy types. Pure.

Its ``spec.precedence`` gives each type a priority; the higher wins before any weight is
looked at. Types Compactor does not implement are kept and reported, and never change a
ranking; a type the singleton leaves out, or a cluster without the singleton, takes the
default priority. The defaults make the cluster admin's kind win.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from compaction import names
from compaction.problem import Problem

DEFAULT_PRIORITIES: Final[Mapping[str, int]] = {
    names.POLICY_KIND: 100,
    names.NAMESPACED_POLICY_KIND: 90,
    # The reference chart's defaults for the resource policies.
    names.CLUSTER_STATIC_POLICY_KIND: 90,
    names.STATIC_POLICY_KIND: 90,
}
KNOWN_TYPES: Final = tuple(DEFAULT_PRIORITIES)


@dataclass(frozen=True)
class Evaluation:
    """The priorities as read; ``declared`` holds every type the object lists, in order."""

    declared: tuple[tuple[str, int], ...] = ()
    generation: int = 0
    present: bool = False  # False: no singleton in the cluster, the defaults rule

    @functools.cached_property
    def _priorities(self) -> Mapping[str, int]:
        return dict(self.declared)

    def priority(self, kind: str) -> int:
        return self._priorities.get(kind, DEFAULT_PRIORITIES.get(kind, 0))

    @property
    def known(self) -> tuple[str, ...]:
        return tuple(t for t, _ in self.declared if t in DEFAULT_PRIORITIES)

    @property
    def unknown(self) -> tuple[str, ...]:
        return tuple(t for t, _ in self.declared if t not in DEFAULT_PRIORITIES)


DEFAULT: Final = Evaluation()


def parse_evaluation(obj: Mapping[str, Any]) -> tuple[Evaluation, list[Problem]]:
    """The singleton as the controller uses it, and what is wrong with it. The CRD refuses
    all of these; an object that slipped past (an older CRD) has its faulty entries ignored,
    each named, and the rest used."""
    problems: list[Problem] = []
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    if meta.get("name") != names.EVALUATION_NAME:
        problems.append(Problem("metadata.name", f"must be {names.EVALUATION_NAME!r}"))
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    raw = spec.get("precedence")
    declared: list[tuple[str, int]] = []
    if raw is not None and not isinstance(raw, list):
        problems.append(Problem("spec.precedence", "must be a list of {type, priority}"))
        raw = []
    for i, entry in enumerate(raw or []):
        at = f"spec.precedence[{i}]"
        if not isinstance(entry, Mapping):
            problems.append(Problem(at, "must be an object with type and priority"))
            continue
        kind, priority = entry.get("type"), entry.get("priority")
        if not isinstance(kind, str) or not kind:
            problems.append(Problem(f"{at}.type", "must be a non-empty string"))
        elif any(kind == seen for seen, _ in declared):
            problems.append(Problem(f"{at}.type", f"{kind!r} is listed twice"))
        elif isinstance(priority, bool) or not isinstance(priority, int) or priority < 1:
            problems.append(Problem(f"{at}.priority",
                                    f"must be a positive whole number, not {priority!r}"))
        else:
            declared.append((kind, priority))
    return Evaluation(tuple(declared), int(meta.get("generation") or 0), True), problems


def default_manifest() -> dict[str, Any]:
    """The singleton the controller creates when none exists: every type it implements, at
    its default priority."""
    return {
        "apiVersion": names.API_VERSION, "kind": names.EVALUATION_KIND,
        "metadata": {"name": names.EVALUATION_NAME,
                     "labels": {names.MANAGED_BY_LABEL: names.MANAGED_BY_VALUE}},
        "spec": {"precedence": [{"type": t, "priority": p}
                                for t, p in DEFAULT_PRIORITIES.items()]},
    }
