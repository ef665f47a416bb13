"""Reads what a pass reads from a live cluster, read-only, with the controller's own list
calls and parsers (``controller.read.reader``): the kubeconfig, every page, the failures in
words a person can act on."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Final, TextIO

import orjson

from controller.kubeapi.client import (
    PAGE,
    TIMED_OUT,
    UNREACHABLE,
    Api,
    ApiError,
    Decode,
    KubeconfigError,
    Page,
)
from controller.read.reader import Reader
from controller.read.sources import (
    JOBS,
    NAMESPACES,
    NODES,
    PDBS,
    PODS,
    REPLICA_SETS,
)
from controller.snapshot.snapshot import Snapshot
from kubectl_compactor.failure import Failure

REQUEST_TIMEOUT: Final = 60.0  # seconds per page; a page of 2,000 Pods is 8 MB of JSON
# Objects per page. kubectl asks for 500; the API server spends about as much again per
# page as per 500 Pods in it, so fewer, larger pages halve its work on a large list.
CHUNK_SIZE: Final = 2000


class PreviewReader(Reader):
    """The reader's list calls and parsers for exactly what a drain plan needs: nodes, Pods,
    disruption budgets, namespaces, the owning workloads (and their ReplicaSets and Jobs),
    and the policies when they come from the cluster (a kind not served has none).

    The Pods, nearly all of what is read, are listed beside the rest rather than after it:
    the API server answers the small lists while the plugin parses Pod pages."""

    def __init__(self, api: Api, cluster_policies: bool, page: int = CHUNK_SIZE) -> None:
        super().__init__(api)
        self.cluster_policies = cluster_policies
        self.page = page

    async def read(self) -> Snapshot:
        pods = asyncio.ensure_future(self._cached(PODS))
        try:
            rest = await self._rest()
            return dataclasses.replace(rest, pods=tuple(await pods))
        finally:
            if not pods.done():  # the rest failed: so does the preview
                pods.cancel()
                with contextlib.suppress(asyncio.CancelledError, ApiError):
                    await pods

    async def _rest(self) -> Snapshot:
        policies = await self._policies() if self.cluster_policies else []
        evaluation = await self._evaluation()
        namespaces = dict(await self._cached(NAMESPACES))
        workloads = await self._workloads(namespaces)
        owners = await self._cached(REPLICA_SETS)
        owners += [owner for owner, _ in await self._cached(JOBS)]
        return Snapshot(
            policies=tuple(policies), evaluation=evaluation, namespaces=namespaces,
            nodes=tuple(await self._cached(NODES)), pdbs=tuple(await self._cached(PDBS)),
            workloads=tuple(workloads), owners=tuple(owners))


def _resource(path: str) -> str:
    """``/apis/apps/v1/deployments`` -> ``deployments.apps``; ``/api/v1/pods`` -> ``pods``."""
    parts = path.strip("/").split("/")
    if parts[0] == "api":
        return parts[-1]
    return f"{parts[-1]}.{parts[1]}"


def api_failure(e: ApiError, path: str, server: str) -> Failure:
    """One line naming what failed."""
    if e.status == UNREACHABLE and e.reason == TIMED_OUT:
        return Failure(f"listing {_resource(path)} at {server}: {e.message} "
                       "(--request-timeout SECONDS, 0 for no limit)")
    if e.status == UNREACHABLE:
        return Failure(f"cannot reach the API server at {server}: {e.message}")
    if e.status == 401:
        return Failure(f"the API server at {server} refused the credentials (401 "
                       "Unauthorized): they are missing, invalid or expired; log in again")
    if e.status == 403:
        return Failure(f"forbidden (403): cannot list {_resource(path)} at the cluster scope "
                       f"({e.message}); grant the ClusterRole compactor-preview")
    return Failure(f"listing {_resource(path)} failed: HTTP {e.status} {e.reason}: "
                   f"{e.message[:300]}")


class Progress:
    """A line on a terminal while the cluster is listed (a large one takes seconds), rewritten
    in place and erased at the end; nothing when ``stream`` is not a terminal, so that
    ``-o json`` piped or redirected stays clean (the progress goes to stderr anyway)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.on = stream.isatty()
        self.objects = 0
        self._shown = 0

    def listed(self, path: str, count: int) -> None:
        self.objects += count
        if self.on:
            self._show(f"listing {_resource(path)}: {self.objects:,} objects read")

    def _show(self, line: str) -> None:
        self.stream.write("\r" + line.ljust(self._shown))
        self.stream.flush()
        self._shown = len(line)

    def done(self) -> None:
        if self.on and self._shown:
            self.stream.write("\r" + " " * self._shown + "\r")
            self.stream.flush()
            self._shown = 0


class _Tracking(Api):
    """The API client, reading only, and telling ``progress`` of every page it reads."""

    progress: Progress | None = None

    async def pages(self, path: str, label_selector: str | None = None,
                    limit: int = PAGE, decode: Decode = orjson.loads) -> AsyncIterator[Page]:
        async for items, version in super().pages(path, label_selector, limit, decode):
            if self.progress is not None:
                self.progress.listed(path, len(items))
            yield items, version

    async def request(self, method: str, path: str, body: Any = None,
                      content_type: str = "application/json",
                      query: dict[str, str] | None = None,
                      decode: Decode = orjson.loads) -> dict[str, Any]:
        assert method == "GET", f"the preview only reads; it asked to {method} {path}"
        return await super().request(method, path, body, content_type, query, decode)


def kubeconfig_files(given: str | None) -> list[str]:
    """The kubeconfig files kubectl would read: ``--kubeconfig``, else ``$KUBECONFIG`` (a
    list), else ``~/.kube/config``."""
    if given:
        return [given]
    listed = [f for f in os.environ.get("KUBECONFIG", "").split(os.pathsep) if f]
    return listed or [str(Path("~/.kube/config").expanduser())]


async def _connect(kubeconfig: str | None, context: str | None, timeout: float) -> _Tracking:
    files = kubeconfig_files(kubeconfig)
    if not any(Path(f).expanduser().is_file() for f in files):
        raise Failure(f"no kubeconfig: {', '.join(files)} not found (--kubeconfig FILE)")
    try:
        api = await _Tracking.from_kubeconfig(files, context)
    except KubeconfigError as e:
        raise Failure(f"cannot load the kubeconfig: {e}") from e
    api.timeout = timeout
    return api


async def read_cluster(kubeconfig: str | None, context: str | None,
                       cluster_policies: bool, progress: Progress | None = None,
                       timeout: float = REQUEST_TIMEOUT, page: int = CHUNK_SIZE) -> Snapshot:
    api = await _connect(kubeconfig, context, timeout)
    api.progress = progress
    try:
        return await PreviewReader(api, cluster_policies, page).read()
    except ApiError as e:
        raise api_failure(e, e.path, str(api.client.configuration.host)) from e
    finally:
        if progress is not None:
            progress.done()
        await api.close()


@contextlib.contextmanager
def bulk_read() -> Iterator[None]:
    """No cyclic garbage collection while the cluster is read, and what was read frozen out
    of later collections. The records read are acyclic and live to the end, yet each full
    collection walks all of them: at 150,000 Pods that cost more CPU than decoding and
    parsing them together."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
