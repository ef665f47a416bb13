"""``StaticPolicy`` and ``ClusterStaticPolicy``: fixed requests and limits per container.

A resource policy sets values, it does not compact: it never competes with a compaction
policy for a workload. Among resource policies, each (container, requests|limits, resource)
is chosen on its own (``compaction.resource_plan``). Reading one reports every problem at
once, with its field path, as the compaction policies' reader does (and reuses its scope).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from compaction import names
from compaction.policy import PolicyBase
from compaction.problem import InvalidPolicy, Problem
from compaction.quantity import parse_quantity
from compaction.validation import PolicyReader

ANY_CONTAINER: Final = "*"
FIELDS: Final = ("requests", "limits")
_RESOURCE_NAME: Final = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_INT32: Final = 2**31 - 1

Resources = Mapping[str, str]  # resource name -> quantity, as written


def is_extended(resource: str) -> bool:
    """An extended resource (``nvidia.com/gpu``): not overcommitted, so the API server wants
    its request equal to its limit. Native ones have no domain or ``kubernetes.io/``."""
    return "/" in resource and not resource.startswith("kubernetes.io/") and \
        not resource.startswith("requests.")


@dataclass(frozen=True)
class ContainerResources:
    """One entry of ``spec.containers``: a container's name, or ``*`` for every container."""

    name: str
    requests: Resources = field(default_factory=dict)
    limits: Resources = field(default_factory=dict)

    def values(self, which: str) -> Resources:
        return self.requests if which == "requests" else self.limits


@dataclass(frozen=True)
class StaticPolicy(PolicyBase):
    containers: tuple[ContainerResources, ...] = ()

    @property
    def kind(self) -> str:
        return names.STATIC_POLICY_KIND if self.namespace else names.CLUSTER_STATIC_POLICY_KIND


def parse_static_policy(obj: Mapping[str, Any],
                        protected: frozenset[str] = names.PROTECTED_NAMESPACES) -> StaticPolicy:
    """The policy with defaults applied; raises InvalidPolicy listing every problem.
    ``protected``: the namespaces no StaticPolicy may live in (``names.protected_namespaces``)."""
    reader = _StaticReader(protected)
    policy = reader.static_policy(obj)
    if reader.problems:
        raise InvalidPolicy(policy.name, reader.problems)
    return policy


def validate_static_policy(obj: Mapping[str, Any]) -> list[Problem]:
    reader = _StaticReader()
    reader.static_policy(obj)
    return reader.problems


class _StaticReader(PolicyReader):
    def static_policy(self, obj: Mapping[str, Any]) -> StaticPolicy:
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
        assert isinstance(meta, Mapping)
        name = str(meta.get("name", ""))
        kind = obj.get("kind", names.CLUSTER_STATIC_POLICY_KIND)
        namespace = ""
        if kind == names.STATIC_POLICY_KIND:
            namespace = str(meta.get("namespace") or "")
            if not namespace:
                self._err("metadata.namespace", "is required")
            elif namespace in self.protected:
                self._err("metadata.namespace", f"Compactor never resizes Pods in {namespace}")
        elif kind != names.CLUSTER_STATIC_POLICY_KIND:
            self._err("kind", f"must be {names.CLUSTER_STATIC_POLICY_KIND} or "
                      f"{names.STATIC_POLICY_KIND}")
        self._name(name, 63)
        spec = self._obj(obj, "spec", "spec",
                         frozenset({"enabled", "weight", "scope", "containers"}))
        scope = spec.get("scope")
        if namespace and isinstance(scope, Mapping) and "namespaceSelector" in scope:
            self._err("spec.scope.namespaceSelector",
                      f"may not be set on a {names.STATIC_POLICY_KIND}: it covers its own "
                      "namespace only")
        return StaticPolicy(
            name=name, namespace=namespace, uid=str(meta.get("uid", "")),
            generation=int(meta.get("generation", 0) or 0),
            creation_timestamp=self._timestamp(meta.get("creationTimestamp")),
            enabled=self._bool(spec, "enabled", "spec.enabled", True),
            weight=self._int(spec, "weight", "spec.weight", 0, lo=-_INT32 - 1),
            scope=self._scope(spec),
            containers=self._containers(spec),
        )

    def _containers(self, spec: Mapping[str, Any]) -> tuple[ContainerResources, ...]:
        raw = spec.get("containers")
        if raw is None:
            self._err("spec.containers", "is required: at least one container entry")
            return ()
        if not isinstance(raw, list) or not raw:
            self._err("spec.containers", "must be a non-empty list of {name, requests, limits}")
            return ()
        out: list[ContainerResources] = []
        for i, item in enumerate(raw):
            at = f"spec.containers[{i}]"
            if not isinstance(item, Mapping):
                self._err(at, "must be an object with name, requests and limits")
                continue
            for extra in sorted(set(item) - {"name", "requests", "limits"}):
                self._err(f"{at}.{extra}", "unknown field")
            name = item.get("name")
            if not isinstance(name, str) or not name:
                self._err(f"{at}.name", "must be a container name or \"*\"")
                continue
            if any(c.name == name for c in out):
                self._err(f"{at}.name", f"{name!r} is listed twice")
                continue
            entry = ContainerResources(name, self._resources(item, "requests", at),
                                       self._resources(item, "limits", at))
            if not entry.requests and not entry.limits:
                self._err(at, "sets neither requests nor limits")
            for resource, value in entry.requests.items():
                if is_extended(resource) and _differs(value, entry.limits.get(resource)):
                    self._err(f"{at}.limits.{resource}", f"must equal the request {value} "
                              "(an extended resource is not overcommitted)")
            out.append(entry)
        return tuple(out)

    def _resources(self, item: Mapping[str, Any], which: str, at: str) -> dict[str, str]:
        raw = item.get(which)
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            self._err(f"{at}.{which}", "must map resource names to quantities")
            return {}
        out: dict[str, str] = {}
        for resource, value in raw.items():
            where = f"{at}.{which}.{resource}"
            if not isinstance(resource, str) or not _RESOURCE_NAME.fullmatch(resource):
                self._err(where, "is not a resource name such as cpu, memory or nvidia.com/gpu")
                continue
            text = str(value) if isinstance(value, int | float) and \
                not isinstance(value, bool) else value
            if not isinstance(text, str):
                self._err(where, f"must be a quantity such as 250m or 1Gi, not {value!r}")
                continue
            try:
                amount = parse_quantity(text)
            except ValueError as e:
                self._err(where, str(e))
                continue
            if amount < 0:
                self._err(where, f"must not be negative, not {text}")
                continue
            out[resource] = text
        return out


def _differs(request: str, limit: str | None) -> bool:
    return limit is None or parse_quantity(request) != parse_quantity(limit)
