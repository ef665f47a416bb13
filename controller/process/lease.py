"""Lease-based leader election, so only one controller replica writes at a time.

A holder renews once per third of the lease duration, however often it is asked, with the
resourceVersion of its last renewal (a GET only when that is stale), so that the requests
leader election costs per minute are fixed, not a multiple of the controller's passes.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from typing import Any

from compaction import kinds
from controller.kubeapi.client import Api, ApiError

log = logging.getLogger("compactor.controller")


def _micro(t: datetime.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


class LeaderElector:
    def __init__(self, api: Api, namespace: str, name: str, identity: str,
                 lease_seconds: int = 15,
                 clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(
                     datetime.UTC)) -> None:
        self.api, self.identity, self.clock = api, identity, clock
        self.lease_seconds = lease_seconds
        leases = kinds.kind("Lease")
        self.path = leases.path(namespace, name)
        self._create_path = leases.path(namespace)
        self.name, self.namespace = name, namespace
        self.leading = False
        self._renewed: datetime.datetime | None = None
        self._held: dict[str, Any] | None = None  # the lease as our last write left it

    async def step(self) -> bool:
        """Acquire or renew; True while we hold the lease. A lost race (409) is just 'no'."""
        now = self.clock()
        if (self.leading and self._renewed is not None
                and now - self._renewed < datetime.timedelta(seconds=self.lease_seconds / 3)):
            return True
        if self.leading and self._held is not None:
            try:
                return self._wrote(await self.api.request(
                    "PUT", self.path, self._renewal(self._held, now)), now)
            except ApiError as e:
                if e.status != 409:
                    log.warning("leader election: %s", e)
                    return self._set(False)
        try:
            lease = await self.api.get_or_none(self.path)
            if lease is None:
                return self._wrote(await self.api.create(self._create_path,
                                                         self._lease(None, now, 0)), now)
            spec: dict[str, Any] = lease.get("spec") or {}
            holder = spec.get("holderIdentity")
            renewed = _parse(spec.get("renewTime")) or _parse(spec.get("acquireTime"))
            duration = int(spec.get("leaseDurationSeconds") or self.lease_seconds)
            expired = renewed is None or renewed + datetime.timedelta(seconds=duration) < now
            if holder != self.identity and holder and not expired:
                return self._set(False)
            transitions = int(spec.get("leaseTransitions") or 0) + (holder != self.identity)
            body = self._lease(lease["metadata"]["resourceVersion"], now, transitions,
                               spec.get("acquireTime") if holder == self.identity else None)
            return self._wrote(await self.api.request("PUT", self.path, body), now)
        except ApiError as e:
            if e.status == 409:
                return self._set(False)
            log.warning("leader election: %s", e)
            return self._set(False)

    def _lease(self, resource_version: str | None, now: datetime.datetime, transitions: int,
               acquired: str | None = None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if resource_version:
            meta["resourceVersion"] = resource_version
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": {"holderIdentity": self.identity,
                         "leaseDurationSeconds": self.lease_seconds,
                         "acquireTime": acquired or _micro(now), "renewTime": _micro(now),
                         "leaseTransitions": transitions}}

    def _renewal(self, held: dict[str, Any], now: datetime.datetime) -> dict[str, Any]:
        spec = held.get("spec") or {}
        return self._lease(str((held.get("metadata") or {}).get("resourceVersion") or ""), now,
                           int(spec.get("leaseTransitions") or 0), spec.get("acquireTime"))

    def _wrote(self, lease: dict[str, Any], now: datetime.datetime) -> bool:
        self._held, self._renewed = lease, now
        return self._set(True)

    def _set(self, leading: bool) -> bool:
        if leading != self.leading:
            log.info("%s leadership of %s/%s", "acquired" if leading else "lost",
                     self.namespace, self.name)
        self.leading = leading
        if not leading:
            self._held = self._renewed = None
        return leading

    async def release(self) -> None:
        if not self.leading:
            return
        lease = await self.api.get_or_none(self.path)
        if lease and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
            lease["spec"]["holderIdentity"] = None
            try:
                await self.api.request("PUT", self.path, lease)
            except ApiError as e:
                log.warning("could not release the lease: %s", e)
        self.leading = False
