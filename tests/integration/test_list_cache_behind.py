"""A list while the real kube-apiserver's Pod watch cache lags behind etcd: the "Too large
resource version" 504 reproduced, and the controller's reader and the plugin (``kubectl
compactor plan``, its own process) both listing every Pod through it.

The lag is made as a large cluster makes it (and as ``loadtest.kwok_cluster`` builds one):
Pods written straight into etcd faster than the API server's watch cache takes them in. Here
the API server is paused (SIGSTOP, to its one PID) while a burst of writes goes into etcd,
and resumed: its cache then takes seconds to work through the backlog. The writes go to a
few thousand keys, over and over, each Pod with a few hundred labels, so that the cache has a
long backlog while the lists stay a few pages long. Then, as upstream's
``CacheDelegator.GetList`` does:

- a first page (no resourceVersion, a consistent read) waits 3 s for the cache, then is
  served from etcd at its newest revision;
- its continue page names that revision; the cache serves it, waits 3 s and answers 504
  Timeout, cause ``ResourceVersionTooLarge``: what a plain client gets.

The cluster is this module's own: pausing the shared one's API server would stall every
other test's components."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import itertools
import json
import os
import re
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import aiohttp
import httpx
import orjson
import pytest
import yaml

from controller.kubeapi.client import Api, ApiError, Obj, cache_behind
from controller.read.reader import PODS, Reader
from localcluster import Cluster, ClusterConfig, Kube
from localcluster.cluster.control_plane import ROOT
from localcluster.cluster.kube import ApiError as KubeError
from localcluster.cluster.kube import path

NAMESPACE: Final = "behind"
KEYS: Final = 2_500  # Pods listed: more than a page of either reader (500 and 2,000)
LABELS: Final = 300  # per Pod: what makes each write cost the watch cache
WRITES: Final = 20_000  # the first burst's; each further round writes twice as many
ROUNDS: Final = 3
PER_TXN: Final = 100  # writes to an etcd transaction (its limit is 128)


@pytest.fixture(scope="module")
def lagging(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(ClusterConfig(workdir=tmp_path_factory.mktemp("lagging-cache"))) as c:
        yield c


def _etcd_revision(cluster: Cluster) -> int:
    """etcd's newest revision, from its gateway (plain HTTP on loopback)."""
    answer = httpx.post(f"{cluster.etcd_url}/v3/kv/range",
                        json={"key": base64.b64encode(b"/").decode()}, timeout=10)
    return int(answer.json()["header"]["revision"])


def _cache_revision(kube: Kube) -> int:
    """The Pod watch cache's resourceVersion, from the API server's own metric."""
    found = re.search(r'apiserver_watch_cache_resource_version\{group="",resource="pods"\} '
                      r'(\S+)', kube.raw("/metrics").text)
    return int(float(found.group(1))) if found else -1


def _template(kube: Kube) -> Obj:
    """One Pod created through the API server, as it stored it (without resourceVersion:
    etcd's revision is that)."""
    kube.ensure_namespace(NAMESPACE, default_service_account=True)
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "template", "namespace": NAMESPACE,
                         "labels": {f"l{i}": "v" for i in range(LABELS)}},
            "spec": {"nodeName": "nowhere",
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}
    made: Obj = {}
    deadline = time.monotonic() + 60
    while not made:  # the default ServiceAccount comes a moment after its namespace
        try:
            made = kube.create(path("pods", NAMESPACE), body)
        except KubeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    meta = {k: v for k, v in made["metadata"].items() if k != "resourceVersion"}
    return {**made, "metadata": meta}


def _writes(template: Obj, count: int) -> Iterator[tuple[str, bytes]]:
    for i in range(count):
        name = f"p-{i % KEYS:04d}"
        meta = {**template["metadata"], "name": name, "uid": str(uuid.uuid4())}
        yield (f"/registry/pods/{NAMESPACE}/{name}",
               orjson.dumps({**template, "metadata": meta}))


async def _put(etcd: str, documents: Iterator[tuple[str, bytes]], parallel: int = 4) -> None:
    async def worker(session: aiohttp.ClientSession) -> None:
        while ops := [{"requestPut": {"key": base64.b64encode(k.encode()).decode(),
                                      "value": base64.b64encode(v).decode()}}
                      for k, v in itertools.islice(documents, PER_TXN)]:
            body = io.BytesIO(orjson.dumps({"success": ops}))  # aiohttp streams it
            async with session.post(f"{etcd}/v3/kv/txn", data=body) as r:
                assert r.status == 200, await r.text()

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:
        await asyncio.gather(*(worker(session) for _ in range(parallel)))


@contextlib.contextmanager
def _paused(cluster: Cluster) -> Iterator[None]:
    """The API server stopped (its one PID, which this module's cluster started) meanwhile."""
    pid = cluster.process("kube-apiserver").pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


@dataclass(frozen=True)
class Plain:
    """What a client that knows nothing of the watch cache got: a first page, then its
    continue page, asked for as kubectl does (no resourceVersion, a limit)."""

    status: int
    body: Obj
    first_seconds: float


def _plain(kube: Kube) -> Plain:
    started = time.monotonic()
    first = kube.request("GET", PODS, params={"limit": "1"})
    took = time.monotonic() - started
    token = first["metadata"]["continue"]
    answer = kube.raw(f"{PODS}?limit=1&continue={token}")  # the token is URL-safe base64
    return Plain(answer.status_code, answer.json(), took)


async def _controller(kube_api: Api) -> list[str]:
    snapshot = await Reader(kube_api).read()
    return sorted(p.name for p in snapshot.pods)


@dataclass(frozen=True)
class Plugin:
    """What the plugin's process did."""

    code: int
    report: str
    log: str  # its stderr, with the controller's log lines at INFO


async def _plugin(cluster: Cluster, policy: Path) -> Plugin:
    """``kubectl compactor plan`` as an admin runs it (its own process, its default page
    size and timeout), with its log shown."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import logging, sys; logging.basicConfig(level=logging.INFO); "
        "from kubectl_compactor.cli import main; main(sys.argv[1:])",
        "plan", "-f", str(policy), "--kubeconfig", str(cluster.kubeconfig), "-o", "json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT)
    out, err = await asyncio.wait_for(child.communicate(), 180)
    return Plugin(await child.wait(), out.decode(), err.decode())


@pytest.mark.asyncio
async def test_lists_through_a_real_api_server_whose_watch_cache_is_behind(
        lagging: Cluster, caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    caplog.set_level("INFO", logger="compactor.controller")
    kube = lagging.client()
    controller = await Api.connect(str(lagging.kubeconfig))
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({
        "apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
        "metadata": {"name": "behind"},
        "spec": {"scope": {"namespaceSelector": {"operator": "In", "values": [NAMESPACE]}}}}))
    try:
        template = _template(kube)
        want = sorted(["template", *(f"p-{i:04d}" for i in range(KEYS))])
        seen: list[str] = []
        for round_ in range(ROUNDS):
            writes = WRITES * 2 ** round_
            with _paused(lagging):
                await _put(lagging.etcd_url, _writes(template, writes))
            target = _etcd_revision(lagging)
            plain, listed, plugin = await asyncio.gather(
                asyncio.to_thread(_plain, kube), _controller(controller),
                _plugin(lagging, policy))
            seen.append(f"{writes} writes: plain continue page {plain.status} (first page "
                        f"{plain.first_seconds:.1f} s); cache at {_cache_revision(kube)} of "
                        f"etcd's {target} after the lists; answers behind: the controller's "
                        f"{controller.behind}, the plugin's "
                        f"{plugin.log.count('watch cache is behind')}")
            # Ours list every Pod once, whatever the cache did meanwhile.
            assert listed == want, seen
            assert plugin.code == 0, (seen, plugin.log[-3000:])
            assert sorted(json.loads(plugin.report)["policies"]) == ["behind"]
            if plain.status == 504 and controller.behind:
                break
            # The backlog was taken in too quickly for the plain client, or for the
            # controller's reader, to meet it: more. (The plugin, a process of its own that
            # starts later, may list after the cache has caught up, on a loaded machine
            # above all; it must list every Pod either way, and it lists through the same
            # client code the reader does.)
        else:
            pytest.fail(f"the watch cache never stayed behind for both clients: {seen}")
        # The real answer, as our client recognises it.
        assert plain.body["reason"] == "Timeout" and plain.body["code"] == 504, plain.body
        assert [c["reason"] for c in plain.body["details"]["causes"]] == [
            "ResourceVersionTooLarge"], plain.body
        assert plain.body["message"].startswith("Timeout: Too large resource version: ")
        assert cache_behind(ApiError.from_status(plain.status, "", plain.body))
        # A list naming no resourceVersion (what ours fall back to) is served meanwhile: the
        # first page waited its 3 s for the cache, then the server read etcd.
        assert plain.first_seconds >= 2.5, seen
        # Ours met the same answer and did not fail on it, and said so.
        assert [r for r in caplog.records if "watch cache is behind" in r.getMessage()]
    finally:
        await controller.close()
        kube.close()
