"""Reads one pass's ``Snapshot``: everything first, before anything is decided.

Every part comes from the watch caches of ``controller.read.sources`` once they are synced, and
from the API server (page by page) until then, or while a kind is not served. The caches hold
the controller's own writes as the API server answered them, never older (see
``controller.kubeapi.informer``), so a cache a moment behind can never bring back state the
controller has just replaced.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from typing import Any, Final

from compaction import names
from compaction.limit_range import LimitRange
from compaction.policy import SchedulerMode
from compaction.workload import WorkloadType
from controller.kubeapi.client import PAGE, ApiError, ReadApi
from controller.kubeapi.informer import Informers
from controller.read.sources import (
    EVALUATIONS,
    JOBS,
    LIMIT_RANGES,
    NAMESPACES,
    NODE_EVENTS,
    NODES,
    OWN_KINDS,
    OWN_SELECTOR,
    PDBS,
    PODS,
    POLICIES,
    REPLICA_SETS,
    STATIC_POLICIES,
    own_path,
    sources,
)
from controller.snapshot.owner import OwnerInfo
from controller.snapshot.pod import PodInfo
from controller.snapshot.policies import EvaluationInfo, PolicyInfo, StaticPolicyInfo
from controller.snapshot.snapshot import Snapshot
from controller.snapshot.workload import WorkloadInfo, list_path

__all__ = ["EVALUATIONS", "JOBS", "PODS", "POLICIES", "REPLICA_SETS", "Reader"]
log = logging.getLogger("compactor.controller")
VERSION_TTL_SECONDS: Final = 600.0
LIST_ATTEMPTS: Final = 2  # a list whose continue token expired is started once more


class Reader:
    def __init__(self, api: ReadApi, namespace: str = names.INSTALL_NAMESPACE,
                 informers: Informers | None = None) -> None:
        self.api, self.namespace, self.informers = api, namespace, informers
        self.page = PAGE  # objects per page of a list the caches do not hold
        self._sources = sources(namespace)
        self._missing_paths: set[str] = set()
        self._version: tuple[str, float] = ("", 0.0)

    async def _policies(self) -> list[PolicyInfo]:
        policies: list[PolicyInfo] = []
        for path in POLICIES:
            policies += await self._cached(path)
        return policies

    async def _evaluation(self) -> EvaluationInfo | None:
        """The PolicyEvaluation singleton; an object of another name ranks nothing."""
        evaluation: EvaluationInfo | None = None
        for name, found in await self._cached(EVALUATIONS):
            if name == names.EVALUATION_NAME:
                evaluation = found
        return evaluation

    async def read(self) -> Snapshot:
        policies = await self._policies()
        evaluation = await self._evaluation()
        namespaces = dict(await self._cached(NAMESPACES))
        static: list[StaticPolicyInfo] = []
        for path in STATIC_POLICIES:
            static += await self._cached(path)
        limit_ranges: dict[str, list[LimitRange]] = {}
        for found in await self._cached(LIMIT_RANGES):
            limit_ranges.setdefault(found.namespace, []).append(found)
        workloads = await self._workloads(namespaces)
        owners: list[OwnerInfo] = await self._cached(REPLICA_SETS)
        owners += [owner for owner, _ in await self._cached(JOBS)]
        pods: list[PodInfo] = await self._cached(PODS)
        nodes = tuple(await self._cached(NODES))
        own = []
        for kind in OWN_KINDS:
            own += await self._cached(own_path(kind, self.namespace), OWN_SELECTOR)
        needs_version = any(p.policy is not None and p.policy.enabled
                            and p.policy.scheduler.mode is SchedulerMode.MANAGED
                            for p in policies)
        pdbs = tuple(await self._cached(PDBS))
        told = tuple(e for e in await self._cached(NODE_EVENTS, OWN_SELECTOR) if e is not None)
        return Snapshot(
            policies=tuple(policies), evaluation=evaluation, namespaces=namespaces,
            static_policies=tuple(static),
            limit_ranges={ns: tuple(r) for ns, r in limit_ranges.items()},
            nodes=nodes, pdbs=pdbs,
            workloads=tuple(workloads), owners=tuple(owners), pods=tuple(pods), own=tuple(own),
            node_events=told,
            cluster_version=await self._cluster_version() if needs_version else "")

    async def _cached(self, path: str, selector: str | None = None) -> list[Any]:
        """The records of ``path``: from its synced cache, else listed page by page and
        parsed as the cache would; a kind whose API is not served has none."""
        informer = self.informers.synced(path) if self.informers else None
        if informer is not None:
            return informer.items()
        if self.informers is not None and self.informers.unserved(path):
            return []  # its cache looks again every minute; a list now would only say 404
        source = self._sources[path]
        parse = source.parse
        assert parse is not None
        out: list[Any] = []
        try:
            for attempt in range(1, LIST_ATTEMPTS + 1):
                out = []
                try:
                    async for items, _ in self.api.pages(path, selector, self.page,
                                                         source.decode):
                        out += [parse(o) for o in items]
                    break
                except ApiError as e:
                    # 410 in the middle of a list: it outlasted the API server's window for
                    # continuing one snapshot (etcd's compaction); a fresh list is consistent.
                    if e.status != 410 or attempt == LIST_ATTEMPTS:
                        raise
                    log.warning("listing %s took too long, its snapshot expired (%s); "
                                "listing it again", path, e.message)
        except ApiError as e:
            if e.status != 404:
                raise
            if path not in self._missing_paths:
                log.info("%s is not served (its API or CRD is not installed); reading none",
                         path)
                self._missing_paths.add(path)
            return []
        self._missing_paths.discard(path)
        return out

    async def _workloads(self, namespaces: Mapping[str, Mapping[str, str]]
                         ) -> list[WorkloadInfo]:
        out: list[WorkloadInfo] = []
        # Workloads in kube-system and in Compactor's own namespace never get a policy.
        protected = names.protected_namespaces(self.namespace)
        for kind in WorkloadType:
            records = await self._cached(list_path(kind))
            found = [w for _, w in records] if kind is WorkloadType.JOB else records
            for w in found:
                if w is None or w.view.namespace in protected:
                    continue
                labels = namespaces.get(w.view.namespace, {})
                out.append(dataclasses.replace(w, view=dataclasses.replace(
                    w.view, namespace_labels=labels)))
        return out

    async def _cluster_version(self) -> str:
        """The API server's version, asked again every ten minutes (it changes on upgrades)."""
        version, at = self._version
        if not version or time.monotonic() - at > VERSION_TTL_SECONDS:
            self._version = (await self.api.version(), time.monotonic())
        return self._version[0]
