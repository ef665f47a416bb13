"""Reading a ``ClusterCompactionPolicy`` or ``CompactionPolicy`` object into the model,
reporting every problem.

Each absent field takes the model's own default (``compaction.policy``), so no default is
written twice. Problems carry their field path and are all returned together; the one renamed
field, ``spec.scheduler.useKubexScheduler``, is read as an alias of ``useManagedScheduler``.
A ``CompactionPolicy`` is read the same way, and may not set what ``RESERVED`` keeps for the
cluster admin (the CRD refuses the same, generated from the same list).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any, Final

from compaction import names
from compaction.cron import cron_problems
from compaction.duration import parse_duration
from compaction.policy import RESERVED as _RESERVED
from compaction.policy import (
    DefaultEvictor,
    DeschedulerSpec,
    HighNodeUtilization,
    NamespaceOperator,
    NamespaceSelector,
    Policy,
    Reserved,
    SchedulerSpec,
    Scope,
    Thresholds,
)
from compaction.problem import InvalidPolicy, Problem
from compaction.selector import parse_selector
from compaction.workload import DEFAULT_WORKLOAD_TYPES, WorkloadType

_INT32: Final = 2**31 - 1
# The model's defaults, read field by field below.
_POLICY, _SCHEDULER, _DESCHEDULER = Policy(name=""), SchedulerSpec(), DeschedulerSpec()
_EVICTOR, _HNU, _THRESHOLDS = DefaultEvictor(), HighNodeUtilization(), Thresholds()


def parse_policy(obj: Mapping[str, Any],
                 protected: frozenset[str] = names.PROTECTED_NAMESPACES) -> Policy:
    """The policy with defaults applied; raises InvalidPolicy listing every problem.
    ``protected``: the namespaces no CompactionPolicy may live in (kube-system and the install
    namespace, ``names.protected_namespaces``)."""
    reader = PolicyReader(protected)
    policy = reader.policy(obj)
    if reader.problems:
        raise InvalidPolicy(policy.name, reader.problems)
    return policy


def validate_policy(obj: Mapping[str, Any],
                    protected: frozenset[str] = names.PROTECTED_NAMESPACES) -> list[Problem]:
    """Every problem of ``obj`` with its field path; empty when the policy is usable."""
    reader = PolicyReader(protected)
    reader.policy(obj)
    return reader.problems


class PolicyReader:
    """Reads one object field by field, defaulting what is absent and noting what is wrong."""

    def __init__(self, protected: frozenset[str] = names.PROTECTED_NAMESPACES) -> None:
        self.problems: list[Problem] = []
        self.protected = protected

    def _err(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def _obj(self, raw: Mapping[str, Any], key: str, path: str,
             known: frozenset[str]) -> Mapping[str, Any]:
        value = raw.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self._err(path, "must be an object")
            return {}
        for extra in sorted(set(value) - known):
            self._err(f"{path}.{extra}", "unknown field")
        return value

    def _bool(self, raw: Mapping[str, Any], key: str, path: str, default: bool) -> bool:
        value = raw.get(key, default)
        if not isinstance(value, bool):
            self._err(path, f"must be true or false, not {value!r}")
            return default
        return value

    def _int(self, raw: Mapping[str, Any], key: str, path: str, default: int,
             lo: int = 0, hi: int = _INT32) -> int:
        value = raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            self._err(path, f"must be a whole number, not {value!r}")
            return default
        if not lo <= value <= hi:
            bound = (f"between {lo} and {hi}" if hi != _INT32
                     else f"at least {lo}" if value < lo else f"at most {hi}")
            self._err(path, f"must be {bound}, not {value}")
            return default
        return value

    def _percent(self, raw: Mapping[str, Any], key: str, path: str, default: float) -> float:
        value = raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            self._err(path, f"must be a number from 0 to 100, not {value!r}")
            return default
        if not 0 <= value <= 100:
            self._err(path, f"must be between 0 and 100, not {value}")
            return default
        return value

    def _str(self, raw: Mapping[str, Any], key: str, path: str, default: str) -> str:
        value = raw.get(key, default)
        if not isinstance(value, str):
            self._err(path, f"must be a string, not {value!r}")
            return default
        return value

    def policy(self, obj: Mapping[str, Any]) -> Policy:
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
        assert isinstance(meta, Mapping)
        name = str(meta.get("name", ""))
        kind = obj.get("kind", names.POLICY_KIND)
        namespace = ""
        if kind == names.NAMESPACED_POLICY_KIND:
            namespace = str(meta.get("namespace") or "")
            if not namespace:
                self._err("metadata.namespace", "is required")
            elif namespace in self.protected:
                self._err("metadata.namespace", f"Compactor never manages Pods in {namespace}")
        elif kind != names.POLICY_KIND:
            self._err("kind", f"must be {names.POLICY_KIND} or {names.NAMESPACED_POLICY_KIND}")
        self._name(name, 63 if namespace else names.MAX_POLICY_ID)
        spec = self._obj(obj, "spec", "spec", frozenset(
            {"scope", "enabled", "scheduler", "setLabelsByEviction", "descheduler", "weight"}))
        if namespace:
            for reserved in _RESERVED:
                self._reserved(spec, reserved)
        return Policy(
            name=name,
            namespace=namespace,
            uid=str(meta.get("uid", "")),
            generation=int(meta.get("generation", 0) or 0),
            creation_timestamp=self._timestamp(meta.get("creationTimestamp")),
            enabled=self._bool(spec, "enabled", "spec.enabled", _POLICY.enabled),
            weight=self._int(spec, "weight", "spec.weight", _POLICY.weight, lo=-_INT32 - 1),
            scope=self._scope(spec),
            scheduler=self._scheduler(spec),
            set_labels_by_eviction=self._bool(
                spec, "setLabelsByEviction", "spec.setLabelsByEviction",
                _POLICY.set_labels_by_eviction),
            descheduler=self._descheduler(spec),
        )

    def _reserved(self, spec: Mapping[str, Any], reserved: Reserved) -> None:
        value: Any = spec
        for key in reserved.path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if value is None or (reserved.allowed is not None and value == reserved.allowed
                             and type(value) is type(reserved.allowed)):
            return
        only = "" if reserved.allowed is None else f" other than {reserved.allowed!r}"
        self._err(reserved.field, f"may not be set{only} on a {names.NAMESPACED_POLICY_KIND}: "
                  f"{reserved.why}")

    def _name(self, name: str, longest: int) -> None:
        if not name:
            self._err("metadata.name", "is required")
        elif len(name) > longest:
            why = (f" (it names the CronJob {names.descheduler_name(name)!r}, max 52)"
                   if longest == names.MAX_POLICY_ID else "")
            self._err("metadata.name", f"must be at most {longest} characters{why}")
        elif not all(c.isascii() and (c.islower() or c.isdigit() or c == "-") for c in name) or (
                name[0] == "-" or name[-1] == "-"):
            self._err("metadata.name", "must be lower-case letters, digits and '-', "
                      "starting and ending with a letter or digit")

    def _timestamp(self, raw: Any) -> datetime.datetime | None:
        if raw is None:
            return None
        if isinstance(raw, datetime.datetime):
            return raw if raw.tzinfo else raw.replace(tzinfo=datetime.UTC)
        try:
            return datetime.datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
        except ValueError:
            self._err("metadata.creationTimestamp", f"not an RFC 3339 time: {raw!r}")
            return None

    def _scope(self, spec: Mapping[str, Any]) -> Scope:
        raw = self._obj(spec, "scope", "spec.scope",
                        frozenset({"labelSelector", "workloadTypes", "namespaceSelector"}))
        label_selector = parse_selector(
            raw.get("labelSelector"), "spec.scope.labelSelector", self.problems)
        return Scope(
            namespace_selector=self._namespace_selector(raw),
            label_selector=label_selector or None,
            workload_types=self._workload_types(raw),
        )

    def _namespace_selector(self, scope: Mapping[str, Any]) -> NamespaceSelector | None:
        at = "spec.scope.namespaceSelector"
        raw = self._obj(scope, "namespaceSelector", at, frozenset({"operator", "values"}))
        if not raw:
            return None
        op_raw, values = raw.get("operator"), raw.get("values")
        try:
            op = NamespaceOperator(str(op_raw))
        except ValueError:
            self._err(f"{at}.operator", f"must be In or NotIn, not {op_raw!r}")
            op = NamespaceOperator.IN
        if (not isinstance(values, list) or not values
                or not all(isinstance(v, str) and v for v in values)):
            self._err(f"{at}.values", "must be a non-empty list of namespace names or patterns")
            return None
        return NamespaceSelector(op, tuple(values))

    def _workload_types(self, scope: Mapping[str, Any]) -> tuple[WorkloadType, ...]:
        at = "spec.scope.workloadTypes"
        raw = scope.get("workloadTypes")
        if raw is None:
            return DEFAULT_WORKLOAD_TYPES
        if not isinstance(raw, list) or not raw:
            self._err(at, "must be a non-empty list of workload kinds")
            return DEFAULT_WORKLOAD_TYPES
        out: list[WorkloadType] = []
        for i, item in enumerate(raw):
            try:
                kind = WorkloadType(item)
            except ValueError:
                allowed = ", ".join(t.value for t in WorkloadType)
                self._err(f"{at}[{i}]", f"unknown workload type {item!r} (one of {allowed})")
                continue
            if kind not in out:
                out.append(kind)
        return tuple(out) or DEFAULT_WORKLOAD_TYPES

    def _scheduler(self, spec: Mapping[str, Any]) -> SchedulerSpec:
        at = "spec.scheduler"
        raw = self._obj(spec, "scheduler", at, frozenset(
            {"useManagedScheduler", "useKubexScheduler", "externalSchedulerName"}))
        use = self._bool(raw, "useManagedScheduler", f"{at}.useManagedScheduler",
                         _SCHEDULER.use_managed_scheduler)
        if "useKubexScheduler" in raw:
            alias = self._bool(raw, "useKubexScheduler", f"{at}.useKubexScheduler",
                               _SCHEDULER.use_managed_scheduler)
            if "useManagedScheduler" in raw and alias != use:
                self._err(f"{at}.useKubexScheduler",
                          "contradicts useManagedScheduler (it is an alias of it)")
            use = alias if "useManagedScheduler" not in raw else use
        external = self._str(raw, "externalSchedulerName", f"{at}.externalSchedulerName", "")
        if external and use:
            self._err(f"{at}.externalSchedulerName",
                      "may only be set together with useManagedScheduler: false")
        if external in (names.MANAGED_SCHEDULER,):
            self._err(f"{at}.externalSchedulerName",
                      f"{external!r} is the managed scheduler; set useManagedScheduler: true")
        return SchedulerSpec(use_managed_scheduler=use, external_scheduler_name=external)

    def _descheduler(self, spec: Mapping[str, Any]) -> DeschedulerSpec:
        at = "spec.descheduler"
        raw = self._obj(spec, "descheduler", at, frozenset({
            "enabled", "nodeSelector", "maxNoOfPodsToEvictPerNode",
            "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal", "defaultEvictor",
            "highNodeUtilization", "interval", "loopDetectionWindow", "loopDetectionThreshold",
            "suppressionDuration", "maxDrainingNodes", "maxEvictionsToFreeNode",
            "evictReplacementsAfter"}))
        interval = self._str(raw, "interval", f"{at}.interval", _DESCHEDULER.interval)
        for message in cron_problems(interval):
            self._err(f"{at}.interval", message)
        window = self._duration(raw, "loopDetectionWindow", _DESCHEDULER.loop_detection_window)
        suppression = (self._duration(raw, "suppressionDuration", window)
                       if raw.get("suppressionDuration") else window)
        return DeschedulerSpec(
            enabled=self._bool(raw, "enabled", f"{at}.enabled", _DESCHEDULER.enabled),
            node_selector=parse_selector(raw.get("nodeSelector"), f"{at}.nodeSelector",
                                         self.problems, allow_wildcards=True),
            max_pods_to_evict_per_node=self._int(
                raw, "maxNoOfPodsToEvictPerNode", f"{at}.maxNoOfPodsToEvictPerNode",
                _DESCHEDULER.max_pods_to_evict_per_node),
            max_pods_to_evict_per_namespace=self._int(
                raw, "maxNoOfPodsToEvictPerNamespace", f"{at}.maxNoOfPodsToEvictPerNamespace",
                _DESCHEDULER.max_pods_to_evict_per_namespace),
            max_pods_to_evict_total=self._int(
                raw, "maxNoOfPodsToEvictTotal", f"{at}.maxNoOfPodsToEvictTotal",
                _DESCHEDULER.max_pods_to_evict_total),
            max_draining_nodes=self._int(
                raw, "maxDrainingNodes", f"{at}.maxDrainingNodes",
                _DESCHEDULER.max_draining_nodes, lo=1),
            max_evictions_to_free_node=None if raw.get("maxEvictionsToFreeNode") is None
            else self._int(raw, "maxEvictionsToFreeNode", f"{at}.maxEvictionsToFreeNode", 0),
            default_evictor=self._evictor(raw),
            high_node_utilization=self._hnu(raw),
            interval=interval,
            loop_detection_window=window,
            loop_detection_threshold=self._int(
                raw, "loopDetectionThreshold", f"{at}.loopDetectionThreshold",
                _DESCHEDULER.loop_detection_threshold, lo=1),
            suppression_duration=suppression,
            evict_replacements_after=self._duration(
                raw, "evictReplacementsAfter", _DESCHEDULER.evict_replacements_after,
                zero=True),
        )

    def _duration(self, raw: Mapping[str, Any], key: str, default: datetime.timedelta,
                  zero: bool = False) -> datetime.timedelta:
        """``zero``: a zero duration (``0s``) is allowed too."""
        if key not in raw:
            return default
        text = self._str(raw, key, f"spec.descheduler.{key}", "")
        if zero and re.fullmatch(r"(0+(\.0*)?(ns|us|µs|ms|s|m|h))+", text):
            return datetime.timedelta(0)
        try:
            return parse_duration(text)
        except ValueError as e:
            self._err(f"spec.descheduler.{key}", str(e))
            return default

    def _evictor(self, desched: Mapping[str, Any]) -> DefaultEvictor:
        at = "spec.descheduler.defaultEvictor"
        raw = self._obj(desched, "defaultEvictor", at, frozenset({
            "nodeFit", "evictSystemCriticalPods", "evictLocalStoragePods", "ignorePvcPods",
            "evictDaemonSetPods", "labelSelector"}))
        return DefaultEvictor(
            node_fit=self._bool(raw, "nodeFit", f"{at}.nodeFit", _EVICTOR.node_fit),
            evict_system_critical_pods=self._bool(
                raw, "evictSystemCriticalPods", f"{at}.evictSystemCriticalPods",
                _EVICTOR.evict_system_critical_pods),
            evict_local_storage_pods=self._bool(
                raw, "evictLocalStoragePods", f"{at}.evictLocalStoragePods",
                _EVICTOR.evict_local_storage_pods),
            ignore_pvc_pods=self._bool(raw, "ignorePvcPods", f"{at}.ignorePvcPods",
                                       _EVICTOR.ignore_pvc_pods),
            evict_daemon_set_pods=self._bool(
                raw, "evictDaemonSetPods", f"{at}.evictDaemonSetPods",
                _EVICTOR.evict_daemon_set_pods),
            label_selector=parse_selector(
                raw.get("labelSelector"), f"{at}.labelSelector", self.problems),
        )

    def _hnu(self, desched: Mapping[str, Any]) -> HighNodeUtilization:
        at = "spec.descheduler.highNodeUtilization"
        raw = self._obj(desched, "highNodeUtilization", at,
                        frozenset({"numberOfNodes", "thresholds"}))
        th = self._obj(raw, "thresholds", f"{at}.thresholds",
                       frozenset({"cpu", "memory", "pods"}))
        return HighNodeUtilization(
            number_of_nodes=self._int(raw, "numberOfNodes", f"{at}.numberOfNodes",
                                      _HNU.number_of_nodes),
            thresholds=Thresholds(
                cpu=self._percent(th, "cpu", f"{at}.thresholds.cpu", _THRESHOLDS.cpu),
                memory=self._percent(th, "memory", f"{at}.thresholds.memory",
                                      _THRESHOLDS.memory),
                pods=self._percent(th, "pods", f"{at}.thresholds.pods", _THRESHOLDS.pods),
            ),
        )
