"""A namespace's LimitRanges, as the API server's LimitRanger applies them to a new Pod. Pure.

LimitRanger first fills in what a container leaves out (``default`` limits, ``defaultRequest``
requests) and, once every mutating webhook has run, refuses a Pod outside ``min``, ``max`` or
``maxLimitRequestRatio``, per container and for the Pod's sum. A resource plan must not turn
an admissible Pod into a refused one, so the controller checks the plan against exactly
these rules, and the webhook applies it only while the namespace's LimitRanges are the ones
checked (``fingerprint``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from compaction.quantity import parse_quantity

Amounts = Mapping[str, Fraction]


@dataclass(frozen=True)
class LimitItem:
    type: str  # Container, Pod (PersistentVolumeClaim items do not concern Pods' resources)
    min: Amounts = field(default_factory=dict)
    max: Amounts = field(default_factory=dict)
    default: Amounts = field(default_factory=dict)
    default_request: Amounts = field(default_factory=dict)
    max_ratio: Amounts = field(default_factory=dict)


@dataclass(frozen=True)
class LimitRange:
    namespace: str
    name: str
    resource_version: str
    items: tuple[LimitItem, ...] = ()


@dataclass(frozen=True)
class Container:
    """A container's resources as LimitRanger sees them (exact amounts)."""

    name: str
    requests: Amounts = field(default_factory=dict)
    limits: Amounts = field(default_factory=dict)
    sidecar: bool = False  # an init container with restartPolicy Always: it runs throughout


def _amounts(raw: Any) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    if isinstance(raw, Mapping):
        for resource, value in raw.items():
            try:
                out[str(resource)] = parse_quantity(str(value))
            except ValueError:
                continue  # the API server stores only valid quantities
    return out


def parse_limit_range(obj: Mapping[str, Any]) -> LimitRange:
    meta = obj.get("metadata") or {}
    items = []
    for raw in (obj.get("spec") or {}).get("limits") or []:
        if not isinstance(raw, Mapping) or raw.get("type") not in ("Container", "Pod"):
            continue
        items.append(LimitItem(str(raw["type"]), _amounts(raw.get("min")),
                               _amounts(raw.get("max")), _amounts(raw.get("default")),
                               _amounts(raw.get("defaultRequest")),
                               _amounts(raw.get("maxLimitRequestRatio"))))
    return LimitRange(str(meta.get("namespace") or ""), str(meta.get("name") or ""),
                      str(meta.get("resourceVersion") or ""), tuple(items))


def fingerprint(versions: Iterable[tuple[str, str]]) -> str:
    """Which LimitRanges, at which resourceVersion, a namespace has: the controller writes it
    into a plan, the webhook compares it with what its watch shows. Empty for none."""
    pairs = sorted(f"{name}@{rv}" for name, rv in versions)
    if not pairs:
        return ""
    return hashlib.sha256("\n".join(pairs).encode()).hexdigest()[:12]


def requests_defaulted(requests: Mapping[str, Fraction], limits: Mapping[str, Fraction]
                       ) -> dict[str, Fraction]:
    """The requests after the API server's Pod defaulting: a resource with a limit and no
    request is requested at its limit."""
    return {**limits, **requests}


def with_defaults(containers: Sequence[Container], ranges: Sequence[LimitRange]
                  ) -> tuple[Container, ...]:
    """The containers as LimitRanger's mutation leaves them. The API server's Pod defaulting
    runs first, when the request is decoded: a request the container leaves out takes its own
    limit, so ``defaultRequest`` never replaces it. Then a missing limit takes the
    ``default``, a missing request the ``defaultRequest``, and a request still missing its
    (defaulted) limit."""
    items = [i for r in ranges for i in r.items if i.type == "Container"]
    out = []
    for c in containers:
        limits, requests = dict(c.limits), requests_defaulted(c.requests, c.limits)
        for item in items:
            for resource, value in item.default.items():
                limits.setdefault(resource, value)
            for resource, value in item.default_request.items():
                requests.setdefault(resource, value)
        out.append(Container(c.name, requests_defaulted(requests, limits), limits, c.sidecar))
    return tuple(out)


def violations(containers: Sequence[Container], ranges: Sequence[LimitRange],
               init_containers: Sequence[Container] = ()) -> frozenset[str]:
    """Every LimitRange rule the Pod of these containers (and init containers) breaks, in
    words. A request left out counts as its limit, as the API server defaults it before
    LimitRanger validates."""
    found: set[str] = set()
    defaulted, inits = _requests_defaulted(containers), _requests_defaulted(init_containers)
    for r in ranges:
        for item in r.items:
            if item.type == "Container":
                for c in (*defaulted, *inits):
                    found |= _check(f"container {c.name}", c.requests, c.limits, item, r.name)
            else:
                found |= _check("the Pod", pod_total(defaulted, inits, "requests"),
                                pod_total(defaulted, inits, "limits"), item, r.name)
    return frozenset(found)


def _requests_defaulted(containers: Sequence[Container]) -> list[Container]:
    return [Container(c.name, requests_defaulted(c.requests, c.limits), c.limits, c.sidecar)
            for c in containers]


def pod_total(containers: Sequence[Container], init_containers: Sequence[Container],
              which: str) -> dict[str, Fraction]:
    """A Pod's requests or limits as LimitRanger totals them: the containers' sum (a container
    leaving a resource unset adds nothing; only a resource none sets has no total) plus the
    sidecars' (init containers that keep running), and at least what any other init
    container needs beside the sidecars started before it, since it runs alone with them."""
    def amounts(c: Container) -> Amounts:
        return c.requests if which == "requests" else c.limits
    total = _sum(amounts(c) for c in containers)
    sidecars: dict[str, Fraction] = {}
    peak: dict[str, Fraction] = {}
    for c in init_containers:
        if c.sidecar:
            total = _sum((total, amounts(c)))
            sidecars = _sum((sidecars, amounts(c)))
            running = sidecars
        else:
            running = _sum((amounts(c), sidecars))
        for k, v in running.items():
            peak[k] = max(peak.get(k, v), v)
    for k, v in peak.items():
        total[k] = max(total.get(k, v), v)
    return total


def _sum(maps: Iterable[Amounts]) -> dict[str, Fraction]:
    """Per resource, the total of the maps that set it."""
    out: dict[str, Fraction] = {}
    for m in maps:
        for k, v in m.items():
            out[k] = out.get(k, Fraction(0)) + v
    return out


def _check(what: str, requests: Amounts, limits: Amounts, item: LimitItem, name: str
           ) -> set[str]:
    out: set[str] = set()
    where = f"(LimitRange {name}, type {item.type})"
    for resource, low in item.min.items():
        request, limit = requests.get(resource), limits.get(resource)
        if request is None:
            out.add(f"{what}: {resource} request unset, minimum {_q(low)} {where}")
        elif request < low:
            out.add(f"{what}: {resource} request {_q(request)} below minimum {_q(low)} {where}")
        if limit is not None and limit < low:
            out.add(f"{what}: {resource} limit {_q(limit)} below minimum {_q(low)} {where}")
    for resource, high in item.max.items():
        request, limit = requests.get(resource), limits.get(resource)
        if limit is None:
            out.add(f"{what}: {resource} limit unset, maximum {_q(high)} {where}")
        elif limit > high:
            out.add(f"{what}: {resource} limit {_q(limit)} above maximum {_q(high)} {where}")
        if request is not None and request > high:
            out.add(f"{what}: {resource} request {_q(request)} above maximum {_q(high)} {where}")
    for resource, ratio in item.max_ratio.items():
        request, limit = requests.get(resource), limits.get(resource)
        if not request:
            out.add(f"{what}: {resource} request unset or 0, limit/request at most "
                    f"{_q(ratio)} {where}")
        elif not limit:
            out.add(f"{what}: {resource} limit unset or 0, limit/request at most "
                    f"{_q(ratio)} {where}")
        elif limit / request > ratio:
            out.add(f"{what}: {resource} limit/request {_q(limit / request)} above "
                    f"{_q(ratio)} {where}")
    return out


def _q(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{float(value):g}"
