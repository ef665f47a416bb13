"""The resource plan of one workload: its static policies composed per container, requests or
limits, and resource, then checked as a whole. Pure.

The controller composes and writes the plan on the workload as the versioned
``compactor.dev/resources`` annotation; the webhook only applies it. For each (container,
field, resource) one policy's value is chosen by ``precedence.resource_rank``, so one plan can
take CPU from one policy and memory from another. The result, merged over what the pod
template sets and what LimitRanger would fill in, is checked without clamping: a request above
its limit, an extended resource whose request is not its limit, or a LimitRange rule the plan
would newly break blocks the whole plan, and the Pods keep what they were created with.

Compact JSON with a stable key order, e.g.::

    {"v":1,"containers":{"app":{"requests":{"cpu":"250m"},"limits":{"memory":"512Mi"}}},
     "limitRanges":"","hash":"<12 hex>"}

``limitRanges`` is the fingerprint of the namespace's LimitRanges the plan was checked against
(``limit_range.fingerprint``); ``hash`` the first 12 hex digits of the SHA-256 of the rest.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from typing import Any, Final

import orjson

from compaction.evaluation import DEFAULT, Evaluation
from compaction.intent import IntentError, load_versioned
from compaction.limit_range import (
    Container,
    LimitRange,
    fingerprint,
    requests_defaulted,
    violations,
    with_defaults,
)
from compaction.precedence import resource_rank
from compaction.quantity import parse_quantity
from compaction.scope import in_scope, is_ignored
from compaction.static_policy import (
    ANY_CONTAINER,
    FIELDS,
    ContainerResources,
    Resources,
    StaticPolicy,
    is_extended,
)
from compaction.workload import Workload

VERSION: Final = 1


@dataclass(frozen=True)
class Choice:
    """One value of the plan and the policy it came from."""

    container: str
    field: str  # requests or limits
    resource: str
    value: str
    policy: str  # the policy's key


@dataclass(frozen=True)
class ResourcePlan:
    """What the webhook sets on a new Pod's containers, by container name."""

    containers: Mapping[str, ContainerResources]
    limit_ranges: str = ""

    def _body(self) -> dict[str, Any]:
        return {"v": VERSION, "containers": {
            name: {f: dict(sorted(c.values(f).items())) for f in FIELDS if c.values(f)}
            for name, c in sorted(self.containers.items())},
            "limitRanges": self.limit_ranges}

    @functools.cached_property
    def hash(self) -> str:
        """A digest of the plan: computed once per plan, not per Pod admitted under it."""
        return hashlib.sha256(orjson.dumps(self._body())).hexdigest()[:12]

    @functools.cached_property
    def rendered(self) -> str:
        body = self._body()
        body["hash"] = self.hash
        return orjson.dumps(body).decode()


class BlockReason(StrEnum):
    """Why a plan is not applied (values are metric label values)."""

    REQUEST_ABOVE_LIMIT = "request_above_limit"
    EXTENDED_UNEQUAL = "extended_request_not_limit"
    LIMIT_RANGE = "limit_range"


@dataclass(frozen=True)
class Blocked:
    reason: BlockReason
    message: str  # names the policies and values
    policies: tuple[str, ...]


@dataclass(frozen=True)
class Composition:
    choices: tuple[Choice, ...] = ()
    plan: ResourcePlan | None = None  # None: no policy sets anything, or the plan is blocked
    blocked: Blocked | None = None

    @property
    def policies(self) -> frozenset[str]:
        """The keys of the policies that contributed a value."""
        return frozenset(c.policy for c in self.choices)


@dataclass(frozen=True)
class TemplateContainer:
    """A pod-template container's resources as written."""

    name: str
    requests: Resources = field(default_factory=dict)
    limits: Resources = field(default_factory=dict)
    sidecar: bool = False  # an init container with restartPolicy Always


def resource_candidates(policies: Iterable[StaticPolicy], workload: Workload
                        ) -> list[StaticPolicy]:
    if is_ignored(workload):
        return []
    return [p for p in policies if p.enabled and in_scope(p, workload)]


def compose(policies: Iterable[StaticPolicy], workload: Workload,
            containers: Sequence[TemplateContainer], evaluation: Evaluation = DEFAULT,
            limit_ranges: Sequence[LimitRange] = (),
            init_containers: Sequence[TemplateContainer] = ()) -> Composition:
    """The workload's plan: every value chosen on its own, then the whole checked. Init
    containers are never resized; they count in the Pod's totals the check judges."""
    matching = resource_candidates(policies, workload)
    choices: list[Choice] = []
    for container in containers:
        for which in FIELDS:
            offers: dict[str, list[tuple[Any, str, str]]] = {}
            for policy in matching:
                for entry in policy.containers:
                    if entry.name not in (container.name, ANY_CONTAINER):
                        continue
                    rank = resource_rank(policy, entry.name == container.name, evaluation)
                    for resource, value in entry.values(which).items():
                        offers.setdefault(resource, []).append((rank, value, policy.key))
            for resource, offered in sorted(offers.items()):
                _, value, key = min(offered)
                choices.append(Choice(container.name, which, resource, value, key))
    if not choices:
        return Composition()
    plan = ResourcePlan(_by_container(choices), fingerprint(
        (r.name, r.resource_version) for r in limit_ranges))
    blocked = check(containers, choices, limit_ranges, init_containers)
    if blocked is not None:
        return Composition(tuple(choices), None, blocked)
    return Composition(tuple(choices), plan)


def _by_container(choices: Sequence[Choice]) -> dict[str, ContainerResources]:
    out: dict[str, dict[str, dict[str, str]]] = {}
    for c in choices:
        out.setdefault(c.container, {"requests": {}, "limits": {}})[c.field][c.resource] = c.value
    return {name: ContainerResources(name, v["requests"], v["limits"]) for name, v in out.items()}


def _exact(values: Mapping[str, str]) -> dict[str, Fraction]:
    return {k: parse_quantity(v) for k, v in values.items()}


def conflicts(requests: Mapping[str, Fraction], limits: Mapping[str, Fraction]
              ) -> list[tuple[BlockReason, str, str]]:
    """A container's resources the API server would refuse: (reason, resource, in words)."""
    out = []
    for resource, request in sorted(requests.items()):
        limit = limits.get(resource)
        if is_extended(resource) and limit != request:
            out.append((BlockReason.EXTENDED_UNEQUAL, resource,
                        f"{resource} request {request} but limit {limit}"))
        elif limit is not None and request > limit:
            out.append((BlockReason.REQUEST_ABOVE_LIMIT, resource,
                        f"{resource} request {float(request):g} above limit {float(limit):g}"))
    return out


def check(containers: Sequence[TemplateContainer], choices: Sequence[Choice],
          limit_ranges: Sequence[LimitRange] = (),
          init_containers: Sequence[TemplateContainer] = ()) -> Blocked | None:
    """The combined result judged as the API server will judge the Pod; None when it may be
    applied."""
    base = with_defaults([Container(c.name, _exact(c.requests), _exact(c.limits))
                          for c in containers], limit_ranges)
    inits = with_defaults([Container(c.name, _exact(c.requests), _exact(c.limits), c.sidecar)
                           for c in init_containers], limit_ranges)
    source = {(c.container, c.field, c.resource): c for c in choices}
    final = []
    for c in base:
        requests, limits = dict(c.requests), dict(c.limits)
        for (name, which, resource), choice in source.items():
            if name == c.name:
                (requests if which == "requests" else limits)[resource] = \
                    parse_quantity(choice.value)
        # A limit the plan sets, with no request anywhere, is also the request (API defaults).
        requests = requests_defaulted(requests, limits)
        final.append(Container(c.name, requests, limits))
        for reason, resource, words in conflicts(requests, limits):
            named = sorted({source[(c.name, w, resource)].policy for w in FIELDS
                            if (c.name, w, resource) in source})
            return Blocked(reason, f"container {c.name}: {words} (from "
                           f"{', '.join(named) or 'the pod template'})", tuple(named))
    new = violations(final, limit_ranges, inits) - violations(base, limit_ranges, inits)
    if new:
        keys = tuple(sorted({c.policy for c in choices}))
        return Blocked(BlockReason.LIMIT_RANGE, "; ".join(sorted(new)) +
                       f" (plan of {', '.join(keys)})", keys)
    return None


@dataclass(frozen=True)
class ParsedPlan:
    plan: ResourcePlan | None
    error: IntentError | None = None  # the intent's reasons: one metric counts both
    detail: str = ""


def parse_resource_plan(text: str | bytes) -> ParsedPlan:
    """Read an annotation value; never raises, every failure is reported in ``error``."""
    raw, error, detail = load_versioned(text, VERSION)
    if raw is None:
        return ParsedPlan(None, error, detail)
    containers, ranges = raw.get("containers"), raw.get("limitRanges", "")
    if not isinstance(containers, dict) or not isinstance(ranges, str):
        return ParsedPlan(None, IntentError.MALFORMED, "containers must be an object")
    out: dict[str, ContainerResources] = {}
    for name, entry in containers.items():
        if not isinstance(entry, dict) or set(entry) - set(FIELDS):
            return ParsedPlan(None, IntentError.MALFORMED, f"container {name!r} malformed")
        values: dict[str, dict[str, str]] = {}
        for which in FIELDS:
            part = entry.get(which, {})
            if not isinstance(part, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in part.items()):
                return ParsedPlan(None, IntentError.MALFORMED, f"{name}.{which} malformed")
            try:
                for v in part.values():
                    parse_quantity(v)
            except ValueError as e:
                return ParsedPlan(None, IntentError.MALFORMED, str(e))
            values[which] = part
        out[name] = ContainerResources(name, values["requests"], values["limits"])
    plan = ResourcePlan(out, ranges)
    if raw.get("hash") != plan.hash:
        return ParsedPlan(None, IntentError.HASH_MISMATCH,
                          f"hash {raw.get('hash')!r} != {plan.hash!r}")
    return ParsedPlan(plan)
