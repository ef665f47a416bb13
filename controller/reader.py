"""Reads one pass's ``Snapshot``: everything first, before anything is decided.

Pods, ReplicaSets and Jobs (the bulk of every pass) come from the watch caches once they are
synced, and from the API server until then. What the controller itself writes (workloads,
policies) is listed fresh each pass, so that a cache a moment behind can never bring back
state the controller has just replaced.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

from compaction import kinds, names
from compaction.limit_range import LimitRange, parse_limit_range
from compaction.policy import SchedulerMode
from compaction.workload import WorkloadType
from controller.api import ApiError, Obj, ReadApi
from controller.informer import Informers
from controller.objects import meta
from controller.snapshot import (
    EvaluationObject,
    OwnerInfo,
    PodInfo,
    PolicyObject,
    Snapshot,
    StaticPolicyObject,
    owner_parser,
    parse_evaluation_object,
    parse_node,
    parse_own,
    parse_pdb,
    parse_pod,
    parse_policy_object,
    parse_static_policy_object,
)
from controller.workloads import WorkloadObject, list_path, workload_object

log = logging.getLogger("compactor.controller")
T = TypeVar("T")

POLICIES: Final = tuple(kinds.kind(k).path() for k in names.POLICY_KINDS)
STATIC_POLICIES: Final = tuple(kinds.kind(k).path() for k in names.STATIC_POLICY_KINDS)
LIMIT_RANGES: Final = kinds.kind("LimitRange").path()
EVALUATIONS: Final = kinds.kind(names.EVALUATION_KIND).path()
PODS, REPLICA_SETS, JOBS = (kinds.kind(k).path() for k in ("Pod", "ReplicaSet", "Job"))
# The paths kept in watch caches, and the record each object is kept as.
CACHED: Final[Mapping[str, Callable[[Obj], Any]]] = {
    PODS: parse_pod, REPLICA_SETS: owner_parser("ReplicaSet"), JOBS: owner_parser("Job")}
OWN_KINDS: Final = ("ConfigMap", "CronJob", "Deployment")
VERSION_TTL_SECONDS: Final = 600.0


class Reader:
    def __init__(self, api: ReadApi, namespace: str = names.INSTALL_NAMESPACE,
                 informers: Informers | None = None) -> None:
        self.api, self.namespace, self.informers = api, namespace, informers
        self._missing_kinds: set[WorkloadType] = set()
        self._missing_paths: set[str] = set()
        self._version: tuple[str, float] = ("", 0.0)

    async def read(self) -> Snapshot:
        policies: list[PolicyObject] = []
        for path in POLICIES:
            policies += [parse_policy_object(o) for o in await self._served(path)]
        evaluation: EvaluationObject | None = None
        for obj in await self._served(EVALUATIONS):
            if meta(obj).get("name") == names.EVALUATION_NAME:
                evaluation = parse_evaluation_object(obj)
        static: list[StaticPolicyObject] = []
        for path in STATIC_POLICIES:
            static += [parse_static_policy_object(o) for o in await self._served(path)]
        limit_ranges: dict[str, list[LimitRange]] = {}
        if any(s.policy is not None and s.policy.enabled for s in static):
            for obj in (await self.api.list(LIMIT_RANGES))[0]:
                parsed = parse_limit_range(obj)
                limit_ranges.setdefault(parsed.namespace, []).append(parsed)
        namespaces = {str(meta(n).get("name")): dict(meta(n).get("labels") or {})
                      for n in (await self.api.list(kinds.kind("Namespace").path()))[0]}
        workloads = await self._workloads(namespaces)
        owners: list[OwnerInfo] = []
        for path in (REPLICA_SETS, JOBS):
            owners += await self._cached(path)
        pods: list[PodInfo] = await self._cached(PODS)
        nodes = tuple(parse_node(n) for n in (await self.api.list(kinds.kind("Node").path()))[0])
        selector = f"{names.MANAGED_BY_LABEL}={names.MANAGED_BY_VALUE}"
        own = []
        for kind in OWN_KINDS:
            items, _ = await self.api.list(kinds.kind(kind).path(self.namespace), selector)
            own += [parse_own(kind, o) for o in items]
        needs_version = any(p.policy is not None and p.policy.enabled
                            and p.policy.scheduler.mode is SchedulerMode.MANAGED
                            for p in policies)
        pdbs = tuple(parse_pdb(o) for o in (await self.api.list(
            kinds.kind("PodDisruptionBudget").path()))[0])
        return Snapshot(
            policies=tuple(policies), evaluation=evaluation, namespaces=namespaces,
            static_policies=tuple(static),
            limit_ranges={ns: tuple(r) for ns, r in limit_ranges.items()},
            nodes=nodes, pdbs=pdbs,
            workloads=tuple(workloads), owners=tuple(owners), pods=tuple(pods), own=tuple(own),
            cluster_version=await self._cluster_version() if needs_version else "")

    async def _served(self, path: str) -> list[Obj]:
        """A list of a kind whose CRD an older install may lack: not served means none."""
        try:
            items, _ = await self.api.list(path)
        except ApiError as e:
            if e.status != 404:
                raise
            if path not in self._missing_paths:
                log.info("%s is not served (its CRD is not installed); reading none", path)
                self._missing_paths.add(path)
            return []
        self._missing_paths.discard(path)
        return items

    async def _cached(self, path: str) -> list[Any]:
        informer = self.informers.synced(path) if self.informers else None
        if informer is not None:
            return informer.items()
        parse = CACHED[path]
        return [parse(o) for o in (await self.api.list(path))[0]]

    async def _workloads(self, namespaces: Mapping[str, Mapping[str, str]]
                         ) -> list[WorkloadObject]:
        out: list[WorkloadObject] = []
        for kind in WorkloadType:
            try:
                items, _ = await self.api.list(list_path(kind))
            except ApiError as e:
                if e.status == 404:  # that API (e.g. Argo Rollouts) is not installed
                    if kind not in self._missing_kinds:
                        log.info("%s API not served; skipping that kind", kind.value)
                        self._missing_kinds.add(kind)
                    continue
                raise
            self._missing_kinds.discard(kind)
            for obj in items:
                ns = str(meta(obj).get("namespace", ""))
                if ns in names.PROTECTED_NAMESPACES:
                    continue
                workload = workload_object(kind, obj, namespaces.get(ns, {}))
                if workload is not None:
                    out.append(workload)
        return out

    async def _cluster_version(self) -> str:
        """The API server's version, asked again every ten minutes (it changes on upgrades)."""
        version, at = self._version
        if not version or time.monotonic() - at > VERSION_TTL_SECONDS:
            self._version = (await self.api.version(), time.monotonic())
        return self._version[0]
