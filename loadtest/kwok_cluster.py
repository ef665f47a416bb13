"""A large cluster of kwok nodes, its Pods already running, built in minutes.

The scheduler and the controller manager would take most of an hour to place and start
150,000 Pods on two cores, and neither is what a benchmark of a reader measures; nor can the
API server itself take 300,000 writes (a creation and a status each) quickly on a loaded
two-core machine (it made 76 Pods a second here). So this writes what they would have
written, as the API server stores it:

- through the API server: the namespaces, the workloads (Deployments with their
  ReplicaSets, a DaemonSet; never reconciled, as no controller manager runs), the nodes
  (kwok's, which kwok turns Ready and keeps alive), and the first Pod of each shape, created
  bound (``spec.nodeName``) and then given the status kwok gives a running Pod on its status
  subresource;
- straight into the API server's etcd, in transactions: every other Pod, a copy of the one of
  its shape as the API server returned it (its defaults, the projected token volume, the
  default tolerations, the managed fields) with its own name, uid, node and Pod IP. The API
  server reads them as its own (its watch cache sees them arrive) and serves them in lists.

The Pods carry ``compactor.test/kwok-status: manual``, so kwok leaves their status alone
instead of writing the same one again. The mix is ``loadtest.planner``'s (the demo's
workloads, about 29 Pods a node, spread round-robin, one pinned Pod per 10 nodes) with a
DaemonSet Pod on every node that, as a real one, requires its node by name.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import itertools
import ssl
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import aiohttp
import orjson

from compaction import names
from loadtest.planner import MIX, namespace
from localcluster import Cluster, Kube
from localcluster.cluster.control_plane import KWOK_ANNOTATION, MANUAL_STATUS
from localcluster.cluster.kube import Credentials, path

PAUSE: Final = "registry.k8s.io/pause:3.10"
HOST_IP: Final = "10.0.1.1"  # what kwok gives its nodes (Cluster.start_kwok's --node-ip)
NAMESPACES: Final = ("production", "batch")
AGENT: Final = ("production", "agent")  # the DaemonSet's namespace and name
PARALLEL: Final = 48  # requests in flight; the API server's default allows 400
_JSON: Final = "application/json"

Request = tuple[str, str, bytes, str]  # method, path, body, content type


@dataclass(frozen=True)
class Shape:
    nodes: int
    pods: int
    seconds: float  # to build it


def _node(name: str) -> dict[str, Any]:
    capacity = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "annotations": {KWOK_ANNOTATION: "fake"},
        "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                   "node.kubernetes.io/instance-type": "m.xlarge", "type": "kwok"}},
        "status": {"capacity": capacity, "allocatable": capacity}}


def team_namespaces(teams: int) -> tuple[str, ...]:
    """The mix's namespaces: its own two with one team, two of each team's with several
    (``loadtest.planner``'s names), each team's share of every workload in them."""
    return tuple(namespace(ns, k, teams) for k in range(teams) for ns in NAMESPACES)


def shares(nodes: int, teams: int) -> Iterator[tuple[str, str, int, int, int]]:
    """(namespace, app, replicas, cpu, MiB) of every workload: each team an equal share."""
    for mixed, app, per_100, cpu, mib in MIX:
        for k in range(teams):
            yield namespace(mixed, k, teams), app, per_100 * nodes // 100 // teams, cpu, mib


def _workloads(nodes: int, teams: int = 1) -> Iterator[tuple[str, dict[str, Any]]]:
    """The Deployments and their one ReplicaSet each (never reconciled: no controller
    manager runs), and the DaemonSet; ``build`` makes each ReplicaSet's Deployment its
    owner."""
    for ns, app, replicas, cpu, mib in shares(nodes, teams):
        labels = {"app": app}
        template = {"metadata": {"labels": labels}, "spec": {"containers": [
            {"name": "app", "image": PAUSE, "resources": {
                "requests": {"cpu": f"{cpu}m", "memory": f"{mib}Mi"}}}]}}
        yield path("deployments", ns), {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": app, "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": template}}
        yield path("replicasets", ns), {
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {
                "name": f"{app}-1", "namespace": ns, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": template}}
    ns, name = namespace(AGENT[0], 0, teams), AGENT[1]
    labels = {"app": name}
    yield path("daemonsets", ns), {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels}, "spec": {"containers": [
                {"name": "agent", "image": PAUSE, "resources": {
                    "requests": {"cpu": "50m", "memory": "64Mi"}}}]}}}}


def _owner(kind: str, name: str, uid: str) -> list[dict[str, Any]]:
    return [{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid,
             "controller": True, "blockOwnerDeletion": True}]


def _pod(ns: str, name: str, node: str, labels: dict[str, str], owner: list[dict[str, Any]],
         cpu: int, mib: int, annotations: dict[str, str] | None = None,
         affinity: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeName": node, "containers": [{"name": "app", "image": PAUSE, "resources": {
            "requests": {"cpu": f"{cpu}m", "memory": f"{mib}Mi"}}}]}
    if affinity:
        spec["affinity"] = affinity
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": ns, "labels": labels, "ownerReferences": owner,
        "annotations": {MANUAL_STATUS: "manual", **(annotations or {})}}, "spec": spec}


def running(index: int, container: str, now: str) -> dict[str, Any]:
    """The status kwok writes for a Pod it started (its pod-ready stage)."""
    ip = f"10.{64 + index // 65536 % 64}.{index // 256 % 256}.{index % 256}"
    return {"status": {
        "phase": "Running", "hostIP": HOST_IP, "hostIPs": [{"ip": HOST_IP}],
        "podIP": ip, "podIPs": [{"ip": ip}], "startTime": now,
        "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                       for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
        "containerStatuses": [{
            "name": container, "image": PAUSE, "imageID": "", "ready": True, "started": True,
            "restartCount": 0, "state": {"running": {"startedAt": now}}}]}}


def pods(nodes: list[str], uids: dict[tuple[str, str], str], teams: int = 1
         ) -> Iterator[tuple[dict[str, Any], str]]:
    """Every Pod of the mix, spread round-robin as ``loadtest.planner.cluster`` spreads it,
    a pinned one per 10 nodes (the teams' in turn) and the DaemonSet's on each, with its
    container's name."""
    at = 0
    for ns, app, replicas, cpu, mib in shares(len(nodes), teams):
        owner = _owner("ReplicaSet", f"{app}-1", uids["ReplicaSet", f"{ns}/{app}-1"])
        for i in range(replicas):
            yield _pod(ns, f"{app}-{i}", nodes[at % len(nodes)],
                       {"app": app, "pod-template-hash": "1"}, owner, cpu, mib), "app"
            at += 1
    ns, name = namespace(AGENT[0], 0, teams), AGENT[1]
    agent = _owner("DaemonSet", name, uids["DaemonSet", f"{ns}/{name}"])
    for i, node in enumerate(nodes):
        yield _pod(ns, f"{name}-{i}", node, {"app": name}, agent, 50, 64, affinity={
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{
                    "key": "metadata.name", "operator": "In", "values": [node]}]}]}}}), "app"
        if i % 10 == 0:
            team = namespace("production", i // 10 % teams, teams)
            web = _owner("ReplicaSet", "web-1", uids["ReplicaSet", f"{team}/web-1"])
            yield _pod(team, f"pinned-{i}", node, {"app": "web"}, web, 100, 128,
                       {names.SAFE_TO_EVICT_ANNOTATION: "false"}), "app"


async def _send(creds: Credentials, batches: Iterable[Sequence[Request]], parallel: int,
                progress: Callable[[int], None]) -> list[str]:
    """Every batch's requests in order, ``parallel`` batches at a time, each request tried
    again on 429 and 5xx; the failures."""
    tls = ssl.create_default_context(cafile=str(creds.ca))
    tls.load_cert_chain(str(creds.cert), str(creds.key))
    source = iter(batches)
    failures: list[str] = []
    done = 0

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal done
        for batch in source:
            for method, url, body, kind in batch:
                for attempt in range(10):
                    async with session.request(method, creds.server + url, data=body,
                                               headers={"Content-Type": kind}) as r:
                        status = r.status
                        text = await r.text() if status >= 300 else ""
                    if status < 300 or status == 409:
                        break
                    if status != 429 and status < 500 or attempt == 9:
                        failures.append(f"{method} {url}: {status} {text[:200]}")
                        break
                    await asyncio.sleep(0.2 * (attempt + 1))
                done += 1
                if done % 10000 == 0:
                    progress(done)

    connector = aiohttp.TCPConnector(ssl=tls, limit=parallel)
    async with aiohttp.ClientSession(connector=connector,
                                     timeout=aiohttp.ClientTimeout(total=120)) as session:
        await asyncio.gather(*(worker(session) for _ in range(parallel)))
    return failures


def send(creds: Credentials, batches: Iterable[Sequence[Request]], what: str,
         parallel: int = PARALLEL) -> None:
    started = time.monotonic()

    def progress(done: int) -> None:
        rate = done / (time.monotonic() - started)
        print(f"  {what}: {done:,} requests, {rate:,.0f}/s", flush=True)
    failures = asyncio.run(_send(creds, batches, parallel, progress))
    if failures:
        raise SystemExit(f"{what}: {len(failures)} requests failed, e.g. {failures[0]}")


def _shape(pod: dict[str, Any]) -> str:
    """Pods of one shape differ only in name, uid, node and IP: the workload's prefix."""
    m = pod["metadata"]
    return f"{m['namespace']}/{m['name'].rsplit('-', 1)[0]}"


def _etcd_key(namespace: str, name: str) -> str:
    return base64.b64encode(f"/registry/pods/{namespace}/{name}".encode()).decode()


def _copy(template: dict[str, Any], pod: dict[str, Any], index: int) -> bytes:
    """``template`` (as the API server stored it) as ``pod``: its name, a uid, its node
    (and node affinity), its Pod IP."""
    m, spec = pod["metadata"], pod["spec"]
    ip = running(index, "", "")["status"]["podIP"]
    out = {**template,
           "metadata": {**template["metadata"], "name": m["name"], "uid": str(uuid.uuid4())},
           "spec": {**template["spec"], "nodeName": spec["nodeName"]},
           "status": {**template["status"], "podIP": ip, "podIPs": [{"ip": ip}]}}
    if "affinity" in spec:
        out["spec"]["affinity"] = spec["affinity"]
    return orjson.dumps(out)


def _stored(template: dict[str, Any]) -> dict[str, Any]:
    """An object as etcd holds it: no resourceVersion (etcd's revision is that)."""
    meta = {k: v for k, v in template["metadata"].items() if k != "resourceVersion"}
    return {**template, "metadata": meta}


async def _put(etcd: str, documents: Iterable[tuple[str, bytes]], parallel: int = 4,
               per_txn: int = 64) -> None:
    """Key-value pairs into etcd through its JSON gateway, ``per_txn`` to a transaction
    (within its default limit of 128 operations), each tried again while etcd, starved of
    CPU, answers that it timed out."""
    source = iter(documents)

    async def worker(session: aiohttp.ClientSession) -> None:
        while True:
            ops = [{"requestPut": {"key": key, "value": base64.b64encode(value).decode()}}
                   for key, value in itertools.islice(source, per_txn)]
            if not ops:
                return
            for attempt in range(20):
                async with session.post(f"{etcd}/v3/kv/txn", json={"success": ops}) as r:
                    if r.status == 200:
                        break
                    if r.status != 503 or attempt == 19:
                        raise RuntimeError(f"etcd refused a transaction: {r.status} "
                                           f"{(await r.text())[:300]}")
                await asyncio.sleep(0.5 * (attempt + 1))

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:
        await asyncio.gather(*(worker(session) for _ in range(parallel)))


def _count(kube: Kube, url: str) -> int:
    page = kube.request("GET", url, params={"limit": "1"})
    return len(page.get("items") or []) + int(
        (page.get("metadata") or {}).get("remainingItemCount") or 0)


def _ready_nodes(kube: Kube) -> int:
    count, token = 0, ""
    while True:
        page = kube.request("GET", path("nodes"), params={"limit": "1000", "continue": token})
        count += sum(any(c.get("type") == "Ready" and c.get("status") == "True"
                         for c in (n.get("status") or {}).get("conditions") or [])
                     for n in page.get("items") or [])
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return count


def _wait(what: str, probe: Callable[[], int], want: int, timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while (have := probe()) < want:
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: only {have:,} of {want:,} after {timeout:.0f} s")
        print(f"  {what}: {have:,} of {want:,} ...", flush=True)
        time.sleep(5)


def build(cluster: Cluster, kube: Kube, nodes: int, teams: int = 1) -> Shape:
    """``nodes`` kwok nodes, Ready, and their Pods, Running (kwok must be started); with
    several ``teams``, each has two namespaces of its own and its share of the mix."""
    started = time.monotonic()
    for ns in team_namespaces(teams):
        kube.ensure_namespace(ns, default_service_account=True)
    uids: dict[tuple[str, str], str] = {}
    for url, body in _workloads(nodes, teams):
        if body["kind"] == "ReplicaSet":
            m = body["metadata"]
            app = m["labels"]["app"]
            m["ownerReferences"] = _owner("Deployment", app,
                                          uids["Deployment", f"{m['namespace']}/{app}"])
        made = kube.create(url, body)
        uids[made["kind"], f"{made['metadata']['namespace']}/{made['metadata']['name']}"] = \
            made["metadata"]["uid"]
    node_names = [f"node-{i:05d}" for i in range(nodes)]
    send(cluster.credentials, ([("POST", path("nodes"), orjson.dumps(_node(n)), _JSON)]
                               for n in node_names), "nodes")
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    templates: dict[str, dict[str, Any]] = {}
    copies: list[tuple[dict[str, Any], int]] = []
    for index, (pod, container) in enumerate(pods(node_names, uids, teams)):
        shape = _shape(pod)
        if shape in templates:
            copies.append((pod, index))
            continue
        m = pod["metadata"]
        kube.create(path("pods", m["namespace"]), pod)
        templates[shape] = _stored(kube.patch(path("pods", m["namespace"], m["name"],
                                                    sub="status"),
                                               running(index, container, now)))
    total = len(copies) + len(templates)
    print(f"  {total:,} Pods: {len(templates)} through the API server, the rest into etcd "
          "...", flush=True)
    asyncio.run(_put(cluster.etcd_url, (
        (_etcd_key(p["metadata"]["namespace"], p["metadata"]["name"]),
         _copy(templates[_shape(p)], p, i)) for p, i in copies)))
    _wait("Pods the API server lists", lambda: _count(kube, path("pods")), total)
    _wait("nodes Ready (kwok)", lambda: _ready_nodes(kube), nodes)
    return Shape(nodes, total, time.monotonic() - started)
