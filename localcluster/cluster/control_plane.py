"""Start etcd, kube-apiserver and, on request, the controller manager, schedulers and kwok."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import yaml

from localcluster.cluster import pki
from localcluster.cluster.kube import Credentials, Kube, path
from localcluster.cluster.process import Process, StartupError, free_port

ROOT = Path(__file__).resolve().parents[2]
SERVICE_CIDR = "10.0.0.0/24"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
MANUAL_STATUS = "compactor.test/kwok-status"


def built(script: str) -> Path:
    """The directory a tools/ build script prints last, after it has built (or found in its
    cache) what its pins say; its progress and errors go to stderr as they come."""
    out = subprocess.run(["bash", str(ROOT / "tools" / script)], check=False,
                         stdout=subprocess.PIPE, text=True)
    if out.returncode != 0:
        raise StartupError(f"tools/{script} failed (see its messages above)")
    return Path(out.stdout.strip().splitlines()[-1])


def tools_bin() -> Path:
    """The cached control-plane binaries, built first if the pins changed (tools/build.sh)."""
    override = os.environ.get("COMPACTOR_TOOLS_BIN")
    return Path(override) if override else built("build.sh")


# What the audit log keeps when asked for: Pod creations and evictions (who, when, the
# answer), and the lists Compactor's own accounts make (a relist after a lost watch).
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create]
    resources: [{group: "", resources: [pods, pods/eviction]}]
  - level: Metadata
    verbs: [list]
    users: ["system:serviceaccount:compactor-system:compactor-controller",
            "system:serviceaccount:compactor-system:compactor-webhook"]
  - level: None
"""


@dataclass(frozen=True)
class ClusterConfig:
    workdir: Path
    bin_dir: Path = field(default_factory=tools_bin)
    start_timeout: float = 90.0
    audit: bool = False  # write AUDIT_POLICY's events to logs/audit.log
    apiserver_flags: tuple[str, ...] = ()
    # Loopback and a free port unless told otherwise: a real node's cluster (in a network
    # namespace of its own) binds every address on 443, the `kubernetes` Service's port,
    # and advertises its bridge address, so Pods reach the API server at the Service IP.
    api_port: int | None = None
    bind_address: str = "127.0.0.1"
    advertise_address: str = "127.0.0.1"


@dataclass(frozen=True)
class NodeShape:
    cpu: str = "4"
    memory: str = "16Gi"
    pods: str = "110"


class Cluster:
    """One local control plane. Every process it starts is stopped by PID in ``stop``."""

    def __init__(self, config: ClusterConfig) -> None:
        self.config = config
        self.dir = config.workdir
        self.bin = config.bin_dir
        self.processes: list[Process] = []
        self.api_port = config.api_port or free_port()
        self.server = f"https://127.0.0.1:{self.api_port}"
        self.pki = self.dir / "pki"
        self.kubeconfig = self.dir / "kubeconfig"
        self.audit_log = self.dir / "logs" / "audit.log"
        self._health: dict[str, Callable[[], bool]] = {}

    # --- lifecycle ---------------------------------------------------------------

    def start(self) -> Cluster:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.pki.mkdir(exist_ok=True)
        try:
            self._write_pki()
            self._start_etcd()
            self._start_apiserver()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for proc in reversed(self.processes):
            proc.stop()
        self.processes.clear()

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def logs(self) -> dict[str, Path]:
        return {p.name: p.log for p in self.processes}

    def process(self, name: str) -> Process:
        return next(p for p in self.processes if p.name == name)

    def restart(self, name: str, kill: bool = False, down: float = 0.0) -> None:
        """Stop one component (SIGTERM, or SIGKILL with ``kill``), leave it down ``down``
        seconds, start it again with the same flags, ports and data, and wait until healthy."""
        proc = self.process(name)
        proc.kill() if kill else proc.stop()
        time.sleep(down)
        proc.start()
        proc.wait_healthy(self._health[name], self.config.start_timeout)

    def client(self) -> Kube:
        return Kube(self.credentials)

    @property
    def credentials(self) -> Credentials:
        return Credentials(
            server=self.server, ca=self.pki / "ca.crt",
            cert=self.pki / "admin.crt", key=self.pki / "admin.key",
        )

    # --- control plane -----------------------------------------------------------

    def _write_pki(self) -> None:
        ca = pki.CertificateAuthority("compactor-local-ca")
        ca.pair.write(self.pki, "ca")
        self.ca = ca
        ca.serving(
            ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
             "kubernetes.default.svc.cluster.local"],
            sorted({"127.0.0.1", "10.0.0.1", self.config.advertise_address}),
        ).write(self.pki, "apiserver")
        ca.client("compactor-admin", ["system:masters"]).write(self.pki, "admin")
        ca.client("front-proxy-client", []).write(self.pki, "front-proxy")
        (self.pki / "sa.key").write_bytes(pki.service_account_key())
        self.kubeconfig.write_text(yaml.safe_dump(self._kubeconfig()))

    def _kubeconfig(self) -> dict[str, object]:
        return {
            "apiVersion": "v1", "kind": "Config", "current-context": "local",
            "clusters": [{"name": "local", "cluster": {
                "server": self.server,
                "certificate-authority": str(self.pki / "ca.crt")}}],
            "users": [{"name": "admin", "user": {
                "client-certificate": str(self.pki / "admin.crt"),
                "client-key": str(self.pki / "admin.key")}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
        }

    def _spawn(self, name: str, *argv: str) -> Process:
        proc = Process(name, argv, self.dir / "logs" / f"{name}.log")
        proc.start()
        self.processes.append(proc)
        return proc

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        proc = self._spawn(
            "etcd", str(self.bin / "etcd"),
            "--name=local", f"--data-dir={self.dir / 'etcd'}",
            f"--listen-client-urls={self.etcd_url}", f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=local=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync=true", "--log-level=warn",
        )
        self._health["etcd"] = lambda: httpx.get(f"{self.etcd_url}/health",
                                                 timeout=1).status_code == 200
        proc.wait_healthy(self._health["etcd"], self.config.start_timeout)

    def _audit_flags(self) -> list[str]:
        if not self.config.audit:
            return []
        policy = self.dir / "audit-policy.yaml"
        policy.write_text(AUDIT_POLICY)
        return [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json"]

    def _start_apiserver(self) -> None:
        p = self.pki
        proc = self._spawn(
            "kube-apiserver", str(self.bin / "kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            f"--bind-address={self.config.bind_address}",
            f"--advertise-address={self.config.advertise_address}",
            f"--secure-port={self.api_port}",
            f"--tls-cert-file={p / 'apiserver.crt'}",
            f"--tls-private-key-file={p / 'apiserver.key'}",
            f"--client-ca-file={p / 'ca.crt'}",
            # Request-header auth configured, so components that delegate authentication
            # (schedulers, descheduler) find a complete extension-apiserver-authentication.
            f"--requestheader-client-ca-file={p / 'ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={p / 'front-proxy.crt'}",
            f"--proxy-client-key-file={p / 'front-proxy.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=MutatingAdmissionWebhook,ValidatingAdmissionWebhook",
            # New nodes get a not-ready taint that only the node lifecycle controller lifts;
            # kwok nodes are Ready from their first status, and that controller is off (below).
            "--disable-admission-plugins=TaintNodesByCondition",
            "--allow-privileged=true",
            f"--service-account-issuer={self.server}/",
            f"--service-account-key-file={p / 'sa.key'}",
            f"--service-account-signing-key-file={p / 'sa.key'}",
            f"--cert-dir={p}",
            "--endpoint-reconciler-type=none",
            "--profiling=false", "--v=1",
            *self._audit_flags(), *self.config.apiserver_flags,
        )

        def ready() -> bool:
            kube = self.client()
            try:
                return kube.raw("/readyz").status_code == 200
            finally:
                kube.close()
        self._health["kube-apiserver"] = ready
        proc.wait_healthy(ready, self.config.start_timeout)

    def _component_flags(self, port: int) -> list[str]:
        return [
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={port}",
            f"--cert-dir={self.dir / 'certs'}",
        ]

    def _wait_component(self, proc: Process, port: int) -> None:
        def healthy() -> bool:
            r = httpx.get(f"https://127.0.0.1:{port}/healthz", verify=False, timeout=1)
            return r.status_code == 200
        proc.wait_healthy(healthy, self.config.start_timeout)

    def start_workers(self) -> None:
        """What turns objects into running Pods on fake nodes: the controller manager, the
        default scheduler and kwok, in that order."""
        self.start_controller_manager()
        self.start_scheduler()
        self.start_kwok()

    def start_controller_manager(self) -> None:
        """Deployments → ReplicaSets → Pods, CronJobs → Jobs, GC, PDB status, ServiceAccounts."""
        port = free_port()
        proc = self._spawn(
            "kube-controller-manager", str(self.bin / "kube-controller-manager"),
            *self._component_flags(port),
            "--leader-elect=false",
            # Node lifecycle would taint kwok nodes; kwok keeps their conditions itself.
            "--controllers=*,-nodeipam,-nodelifecycle,-cloud-node-lifecycle,-route,-service,"
            "-bootstrapsigner,-tokencleaner",
            f"--service-account-private-key-file={self.pki / 'sa.key'}",
            f"--root-ca-file={self.pki / 'ca.crt'}",
            "--use-service-account-credentials=false",
            "--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10",
            "--kube-api-qps=200", "--kube-api-burst=400",
            "--v=1",
        )
        self._wait_component(proc, port)

    def start_scheduler(self, name: str = "kube-scheduler", config: Path | None = None) -> Process:
        """The default kube-scheduler, or a second one from a KubeSchedulerConfiguration file."""
        port = free_port()
        flags = [f"--config={config}"] if config else [
            "--leader-elect=false", "--kube-api-qps=200", "--kube-api-burst=400"]
        proc = self._spawn(name, str(self.bin / "kube-scheduler"),
                           *self._component_flags(port), *flags, "--v=1")
        self._wait_component(proc, port)
        return proc

    def start_kwok(self) -> None:
        """Fake kubelets: nodes annotated ``kwok.x-k8s.io/node=fake`` turn Ready, Pods Running
        (a Job's Pods then complete). Pods annotated ``compactor.test/kwok-status: manual``
        are left alone, so a test can hold a Job's Pod Running (``hold_running``)."""
        port = free_port()
        proc = self._spawn(
            "kwok", str(self.bin / "kwok"),
            f"--kubeconfig={self.kubeconfig}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
            "--cidr=10.0.64.0/18", "--node-ip=10.0.1.1",
            f"--disregard-status-with-annotation-selector={MANUAL_STATUS}=manual",
            f"--server-address=127.0.0.1:{port}",
        )
        proc.wait_healthy(
            lambda: httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200,
            self.config.start_timeout,
        )

    # --- cluster content -----------------------------------------------------------

    def add_nodes(self, kube: Kube, names: list[str], shape: NodeShape = NodeShape(),
                  labels: dict[str, str] | None = None, wait: bool = True,
                  taints: list[dict[str, str]] | None = None) -> None:
        for name in names:
            capacity = {"cpu": shape.cpu, "memory": shape.memory, "pods": shape.pods}
            kube.create(path("nodes"), {
                "apiVersion": "v1", "kind": "Node",
                "metadata": {
                    "name": name, "annotations": {KWOK_ANNOTATION: "fake"},
                    "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                               "type": "kwok", **(labels or {})},
                },
                "spec": {"taints": taints or []},
                "status": {"capacity": capacity, "allocatable": capacity},
            })
        if wait:
            deadline = time.monotonic() + self.config.start_timeout
            for name in names:
                while not _node_ready(kube.get(path("nodes", name=name))):
                    if time.monotonic() > deadline:
                        raise StartupError(f"node {name} never became Ready (is kwok running?)")
                    time.sleep(0.1)


def _node_ready(node: dict[str, object]) -> bool:
    status = node.get("status")
    conditions = status.get("conditions", []) if isinstance(status, dict) else []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
