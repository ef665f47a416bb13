"""What a run records: the cluster sampled every couple of seconds (nodes with their price,
NodeClaims, Pods, PDB status) and the evictions the API server granted, each with its actor.
``metrics`` computes everything from these records alone, so the figures can be recomputed
from a run's saved timeline."""

from __future__ import annotations

import datetime
import json
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from localcluster.cluster.control_plane import Cluster
from localcluster.cluster.karpenter import (
    KARPENTER_API,
    NODEPOOL_LABEL,
    disrupting,
)
from localcluster.cluster.kube import Kube, path

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


@dataclass(frozen=True)
class NodeSample:
    name: str
    instance_type: str
    disrupting: bool = False


@dataclass(frozen=True)
class PodSample:
    uid: str
    namespace: str
    name: str
    workload: str  # the ``app`` label
    node: str
    ready: bool  # bound, Running and not terminating
    daemonset: bool
    created: float  # epoch seconds
    scheduled: float | None  # epoch seconds the PodScheduled condition turned True
    scheduler: str = ""  # spec.schedulerName: which scheduler placed it


@dataclass(frozen=True)
class PdbSample:
    key: str
    current_healthy: int
    desired_healthy: int


@dataclass(frozen=True)
class Sample:
    t: float  # seconds since the run started
    nodes: tuple[NodeSample, ...]
    claims: int
    pods: tuple[PodSample, ...]
    pdbs: tuple[PdbSample, ...]


@dataclass(frozen=True)
class Eviction:
    t: float
    namespace: str
    pod: str
    actor: str  # karpenter, descheduler, runtime-hook or other


def _epoch(stamp: str | None) -> float | None:
    if not stamp:
        return None
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def actor_of(user: str, agent: str) -> str:
    """Who asked for an eviction, from the audit event's user and user agent."""
    if user.endswith(":compactor-controller"):
        return "runtime-hook"
    if "descheduler" in user or agent.startswith("descheduler"):
        return "descheduler"
    if "karpenter" in agent:
        return "karpenter"
    return "other"


def parse_evictions(lines: list[bytes], started: float) -> list[Eviction]:
    """Granted ``pods/eviction`` creations in audit-log lines, timed from ``started``."""
    out = []
    for line in lines:
        e = json.loads(line)
        ref = e.get("objectRef") or {}
        if (e.get("verb") == "create" and ref.get("subresource") == "eviction"
                and e.get("stage") == "ResponseComplete"
                and (e.get("responseStatus") or {}).get("code") in (200, 201)):
            at = _epoch(e.get("requestReceivedTimestamp")) or started
            out.append(Eviction(at - started, ref.get("namespace", ""), ref.get("name", ""),
                                actor_of((e.get("user") or {}).get("username", ""),
                                         e.get("userAgent", ""))))
    return out


def sample(kube: Kube, pool: str, t: float) -> Sample:
    """One look at the cluster."""
    nodes = tuple(NodeSample(n["metadata"]["name"],
                             n["metadata"]["labels"].get(INSTANCE_TYPE_LABEL, ""),
                             disrupting(n))
                  for n in kube.items(path("nodes"), label_selector=f"{NODEPOOL_LABEL}={pool}"))
    claims = len(kube.items(path("nodeclaims", api=KARPENTER_API)))
    pods = []
    for p in kube.items(path("pods")):
        meta, status = p["metadata"], p.get("status") or {}
        sched = next((c for c in status.get("conditions") or []
                      if c.get("type") == "PodScheduled" and c.get("status") == "True"), None)
        pods.append(PodSample(
            meta["uid"], meta["namespace"], meta["name"], (meta.get("labels") or {}).get(
                "app", ""), p["spec"].get("nodeName", ""),
            bool(p["spec"].get("nodeName")) and status.get("phase") == "Running"
            and not meta.get("deletionTimestamp"),
            any(o.get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or []),
            _epoch(meta.get("creationTimestamp")) or 0.0,
            _epoch(sched.get("lastTransitionTime")) if sched else None,
            p["spec"].get("schedulerName", "")))
    pdbs = tuple(PdbSample(f"{b['metadata']['namespace']}/{b['metadata']['name']}",
                           int((b.get("status") or {}).get("currentHealthy", 0)),
                           int((b.get("status") or {}).get("desiredHealthy", 0)))
                 for b in kube.items(path("poddisruptionbudgets")))
    return Sample(round(t, 2), nodes, claims, tuple(pods), pdbs)


@dataclass
class Recorder:
    """Samples the cluster from a thread of its own until ``stop``."""

    cluster: Cluster
    pool: str
    interval: float = 2.0
    started: float = 0.0  # epoch seconds
    samples: list[Sample] = field(default_factory=list)
    errors: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Takes the first sample before it returns: the restored start, the same for every
        arm, before the arm begins (a day cycle's first rise would otherwise be in it for an
        arm that begins at once, and not for one that sets Compactor up first)."""
        self.started = time.time()
        kube = self.cluster.client()
        try:
            self.samples.append(sample(kube, self.pool, 0.0))
        finally:
            kube.close()
        self._thread = threading.Thread(target=self._run, name="race-recorder", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        kube = self.cluster.client()
        try:
            while not self._stop.wait(self.interval):
                try:
                    self.samples.append(sample(kube, self.pool, time.time() - self.started))
                except Exception:  # noqa: BLE001 - a busy API server: the next look counts
                    self.errors += 1
        finally:
            kube.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)

    def evictions(self) -> list[Eviction]:
        log = self.cluster.audit_log
        lines = log.read_bytes().splitlines() if log.exists() else []
        return [e for e in parse_evictions(lines, self.started) if e.t >= 0]


def dump(file: Path, samples: list[Sample], evictions: list[Eviction]) -> None:
    """The timeline as JSON lines (samples, then evictions), for recomputing the metrics."""
    with file.open("w") as f:
        for s in samples:
            f.write(json.dumps({"sample": asdict(s)}) + "\n")
        for e in evictions:
            f.write(json.dumps({"eviction": asdict(e)}) + "\n")


def load(file: Path) -> tuple[list[Sample], list[Eviction]]:
    samples, evictions = [], []
    for line in file.read_text().splitlines():
        d: dict[str, Any] = json.loads(line)
        if "sample" in d:
            s = d["sample"]
            samples.append(Sample(s["t"], tuple(NodeSample(**n) for n in s["nodes"]),
                                  s["claims"], tuple(PodSample(**p) for p in s["pods"]),
                                  tuple(PdbSample(**b) for b in s["pdbs"])))
        else:
            evictions.append(Eviction(**d["eviction"]))
    return samples, evictions
