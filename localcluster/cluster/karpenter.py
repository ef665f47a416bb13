"""Karpenter's kwok provider beside the local cluster: the autoscaler that creates and deletes
kwok nodes through NodeClaims, so that the nodes Compactor empties are really removed.

Built by tools/build-karpenter.sh (not by ``make test``). It reads its kubeconfig from
``KUBECONFIG`` (it panics on a ``--kubeconfig`` flag), runs without leader election, and
serves metrics and health on free loopback ports. One NodePool of one instance type, the
scenario's node shape; its nodes are annotated ``kwok.x-k8s.io/node=fake``, so the cluster's
kwok runs them. Nodes the cluster adds itself are never Karpenter's to remove.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
import yaml

from localcluster.cluster.control_plane import Cluster, NodeShape, built
from localcluster.cluster.kube import Kube, path, wait_for
from localcluster.cluster.process import Process, free_port

NODEPOOL_LABEL: Final = "karpenter.sh/nodepool"
DISRUPTED_TAINT: Final = "karpenter.sh/disrupted"
DO_NOT_DISRUPT: Final = "karpenter.sh/do-not-disrupt"
KARPENTER_API: Final = "apis/karpenter.sh/v1"
KWOK_API: Final = "apis/karpenter.kwok.sh/v1alpha1"
NODE_CLASS: Final = "default"
# Karpenter's kwok instance types reserve 100m of CPU and 10Mi of memory for the kubelet
# (kwok/cloudprovider/helpers.go): an instance type this much larger has the shape's allocatable.
_KUBE_RESERVED_MILLICPU: Final = 100
_KUBE_RESERVED_MI: Final = 10
SPIKE_NAMESPACE: Final = "spike"
ZONE: Final = "test-zone-a"


def karpenter_dir() -> Path:
    """The directory of the cached build (``bin/karpenter-kwok`` and ``crds/karpenter``), built
    first if its pin changed; ``COMPACTOR_KARPENTER_DIR`` overrides it."""
    override = os.environ.get("COMPACTOR_KARPENTER_DIR")
    return Path(override) if override else built("build-karpenter.sh").parent


@dataclass(frozen=True)
class Consolidation:
    """A NodePool's ``spec.disruption``: ``WhenEmpty`` or ``WhenEmptyOrUnderutilized``, and how
    long a node must qualify first (``Never`` turns consolidation off)."""

    policy: str = "WhenEmpty"
    after: str = "Never"
    # The share of nodes that may be disrupted at once; None leaves Karpenter's default (10%).
    budget: str | None = "100%"

    def render(self) -> dict[str, Any]:
        out: dict[str, Any] = {"consolidationPolicy": self.policy,
                               "consolidateAfter": self.after}
        if self.budget is not None:
            out["budgets"] = [{"nodes": self.budget}]
        return out


def _millicpu(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def _mebibytes(q: str) -> int:
    units = {"Mi": 1, "Gi": 1024, "Ti": 1024 * 1024}
    for suffix, factor in units.items():
        if q.endswith(suffix):
            return int(float(q[: -len(suffix)]) * factor)
    return int(q) // 2**20


def instance_type_name(shape: NodeShape) -> str:
    return f"shape-{_millicpu(shape.cpu)}m-{_mebibytes(shape.memory)}mi"


def instance_types(shape: NodeShape, price: float = 0.2) -> list[dict[str, Any]]:
    """The one instance type, as ``INSTANCE_TYPES_FILE_PATH`` lists them: the shape plus what
    Karpenter's kwok provider reserves, so that its nodes' allocatable is the shape."""
    return [{
        "name": instance_type_name(shape), "architecture": "amd64",
        "operatingSystems": ["linux"],
        "resources": {"cpu": f"{_millicpu(shape.cpu) + _KUBE_RESERVED_MILLICPU}m",
                      "memory": f"{_mebibytes(shape.memory) + _KUBE_RESERVED_MI}Mi",
                      "pods": shape.pods},
        "offerings": [{"Price": price, "Available": True, "Requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE]}]}],
    }]


def node_pool(name: str, shape: NodeShape, consolidation: Consolidation,
              labels: dict[str, str] | None = None,
              requirements: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The NodePool; ``requirements`` replace its one instance type (a catalogue's pool)."""
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {"kubernetes.io/os": "linux", "type": "kwok",
                                        **(labels or {})}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                                     "name": NODE_CLASS},
                    "requirements": requirements or [{
                        "key": "node.kubernetes.io/instance-type", "operator": "In",
                        "values": [instance_type_name(shape)]}],
                    "expireAfter": "Never",
                }},
            "disruption": consolidation.render(),
        },
    }


class Karpenter:
    """The provider's process, its CRDs and one NodePool. Stopped by PID in ``stop``."""

    def __init__(self, cluster: Cluster, shape: NodeShape, pool: str = "default",
                 home: Path | None = None, catalogue: list[dict[str, Any]] | None = None,
                 requirements: list[dict[str, Any]] | None = None,
                 log_level: str = "info") -> None:
        self.cluster = cluster
        # "debug" keeps each consolidation's decision (Balanced's scores among them).
        self.log_level = log_level
        self.shape = shape
        # Instance types and the pool's requirements; by default the shape's one type.
        self.catalogue = catalogue
        self.requirements = requirements
        self.pool = pool
        self.home = home or karpenter_dir()
        self.dir = cluster.dir / "karpenter"
        self.process: Process | None = None
        self.metrics_port = 0

    def install(self, kube: Kube, consolidation: Consolidation = Consolidation()) -> None:
        """The CRDs (established before use), the KWOKNodeClass and the NodePool."""
        crds = sorted((self.home / "crds" / "karpenter").glob("*.yaml"))
        names = []
        for file in crds:
            crd = yaml.safe_load(file.read_text())
            kube.apply(path("customresourcedefinitions", name=crd["metadata"]["name"],
                            api="apis/apiextensions.k8s.io/v1"), crd)
            names.append(crd["metadata"]["name"])
        for name in names:
            wait_for(f"CRD {name} established", _established_probe(kube, name))
        kube.apply(path("kwoknodeclasses", name=NODE_CLASS, api=KWOK_API), {
            "apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
            "metadata": {"name": NODE_CLASS}, "spec": {}})
        self.set_pool(kube, consolidation)

    def set_pool(self, kube: Kube, consolidation: Consolidation) -> None:
        kube.apply(path("nodepools", name=self.pool, api=KARPENTER_API),
                   node_pool(self.pool, self.shape, consolidation,
                             requirements=self.requirements))

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        types = self.dir / "instance-types.json"
        types.write_text(json.dumps(self.catalogue or instance_types(self.shape)))
        self.metrics_port, health = free_port(), free_port()
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig),
               "INSTANCE_TYPES_FILE_PATH": str(types)}
        proc = Process("karpenter", [
            str(self.home / "bin" / "karpenter-kwok"), "--disable-leader-election",
            f"--metrics-port={self.metrics_port}", f"--health-probe-port={health}",
            # Decide within a second of the last pending Pod: the demo's batches are small.
            "--batch-idle-duration=1s", "--batch-max-duration=5s", f"--log-level={self.log_level}",
        ], self.cluster.dir / "logs" / "karpenter.log", env=env)
        proc.start()
        self.process = proc
        proc.wait_healthy(
            lambda: httpx.get(f"http://127.0.0.1:{health}/readyz", timeout=1).status_code == 200,
            self.cluster.config.start_timeout)

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None

    def __enter__(self) -> Karpenter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def metric(self, name: str) -> float:
        """The sum of a counter or gauge's samples on Karpenter's metrics endpoint."""
        text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(name) and line[len(name):len(name) + 1] in ("{", " "))


def _established_probe(kube: Kube, name: str) -> Callable[[], bool]:
    return lambda: _established(kube, name)


def _established(kube: Kube, name: str) -> bool:
    crd = kube.get(path("customresourcedefinitions", name=name,
                        api="apis/apiextensions.k8s.io/v1"))
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (crd.get("status") or {}).get("conditions") or [])


def pool_nodes(kube: Kube, pool: str) -> list[dict[str, Any]]:
    """The NodePool's nodes as the API holds them (any state)."""
    return kube.items(path("nodes"), label_selector=f"{NODEPOOL_LABEL}={pool}")


def node_claims(kube: Kube) -> list[dict[str, Any]]:
    return kube.items(path("nodeclaims", api=KARPENTER_API))


def disrupting(node: dict[str, Any]) -> bool:
    """Karpenter is taking the node away: its disrupted taint is on."""
    return any(t.get("key") == DISRUPTED_TAINT for t in node["spec"].get("taints") or [])


def _ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def provision(kube: Kube, pool: str, count: int, shape: NodeShape, timeout: float = 300.0
              ) -> list[str]:
    """``count`` nodes from the NodePool, the way a load spike makes them: a Deployment of
    ``count`` Pods each taking more than half a node, Pending until Karpenter launches a node
    for each; once they run, the Deployment goes and the nodes stay (their NodePool must not
    consolidate yet). Returns the nodes' names."""
    kube.ensure_namespace(SPIKE_NAMESPACE, default_service_account=True)
    cpu = f"{_millicpu(shape.cpu) * 6 // 10}m"
    labels = {"app": "spike"}
    spike = path("deployments", SPIKE_NAMESPACE, "spike")
    kube.apply(spike, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "spike"},
        "spec": {"replicas": count, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"terminationGracePeriodSeconds": 0,
                     "nodeSelector": {NODEPOOL_LABEL: pool},
                     "containers": [{"name": "spike", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": cpu}}}]}}}})

    def spiked() -> list[str] | None:
        try:
            pods = kube.items(path("pods", SPIKE_NAMESPACE))
            nodes = [n for n in pool_nodes(kube, pool) if _ready(n)]
        except httpx.HTTPError:  # an API server busy with a hundred new nodes: ask again
            return None
        running = [p for p in pods if p["status"].get("phase") == "Running"]
        return sorted(n["metadata"]["name"] for n in nodes) \
            if len(running) == count and len(nodes) >= count else None
    names = wait_for(f"{count} nodes from the NodePool {pool}", spiked, timeout=timeout,
                     interval=1.0)
    kube.delete(spike)
    wait_for("the spike's Pods gone",
             lambda: not kube.items(path("pods", SPIKE_NAMESPACE)), timeout=120, interval=0.5)
    return names


@dataclass
class NodeWatch:
    """The NodePool's nodes and NodeClaims over time, polled from a thread of its own: when each
    node was last seen, and the NodeClaims created after ``start``."""

    cluster: Cluster
    pool: str
    interval: float = 0.5
    started: float = 0.0
    at_start: frozenset[str] = frozenset()
    claims_at_start: frozenset[str] = frozenset()
    last_seen: dict[str, float] = field(default_factory=dict)
    claims: set[str] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self, kube: Kube) -> None:
        self.started = time.monotonic()
        self.at_start = frozenset(n["metadata"]["name"] for n in pool_nodes(kube, self.pool))
        self.claims_at_start = frozenset(c["metadata"]["name"] for c in node_claims(kube))
        self._thread = threading.Thread(target=self._poll, name="node-watch", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        kube = self.cluster.client()
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                try:
                    for n in pool_nodes(kube, self.pool):
                        self.last_seen[n["metadata"]["name"]] = now
                    self.claims.update(c["metadata"]["name"] for c in node_claims(kube))
                except Exception:  # noqa: BLE001 - a slow API server: poll again
                    pass
                self._stop.wait(self.interval)
        finally:
            kube.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def census(self, kube: Kube) -> NodeCensus:
        """What happened to the NodePool's nodes since ``start``, as of now."""
        now = {n["metadata"]["name"] for n in pool_nodes(kube, self.pool)}
        removed = self.at_start - now
        last = max((self.last_seen.get(n, self.started) for n in removed), default=None)
        return NodeCensus(len(self.at_start), len(now), len(removed),
                          len(self.claims - self.claims_at_start),
                          None if last is None else last - self.started)


@dataclass(frozen=True)
class NodeCensus:
    """The NodePool's nodes across a run."""

    before: int
    after: int
    removed: int  # of the nodes there at the start
    launched: int  # NodeClaims created during the run
    # From the start to the last sight of the last node removed (within the poll interval).
    seconds_to_last_removal: float | None


def empty_nodes(kube: Kube, pool: str) -> list[str]:
    """The NodePool's nodes running nothing but DaemonSet Pods: Karpenter's WhenEmpty removes
    them once ``consolidateAfter`` has passed."""
    held: set[str] = set()
    for p in kube.items(path("pods")):
        if p["metadata"].get("deletionTimestamp") or p["status"].get("phase") in (
                "Succeeded", "Failed"):
            continue
        owners = p["metadata"].get("ownerReferences") or []
        if not any(o.get("kind") == "DaemonSet" for o in owners):
            held.add(p["spec"].get("nodeName", ""))
    return sorted(n["metadata"]["name"] for n in pool_nodes(kube, pool)
                  if n["metadata"]["name"] not in held)
