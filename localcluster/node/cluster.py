"""A local cluster with one real node (containerd + kubelet) beside kwok nodes.

It runs only inside a network namespace of its own (``python -m localcluster.node``): the API
server binds every address there on 443 and the ``kubernetes`` Service's IP sits on ``lo``,
so Pods reach it at ``KUBERNETES_SERVICE_HOST`` without kube-proxy. kwok nodes carry
``KWOK_TAINT``: Pods that do not tolerate it land on the real node.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import yaml

from localcluster.cluster import pki
from localcluster.cluster.control_plane import (
    Cluster,
    ClusterConfig,
    NodeShape,
    built,
    tools_bin,
)
from localcluster.cluster.kube import Kube, path
from localcluster.cluster.process import Process
from localcluster.node import cni, containerd, kubelet, netns
from localcluster.node.containerd import ContainerdPaths
from localcluster.node.kubelet import KubeletPaths

SERVICE_IP = "10.0.0.1"  # the first address of control_plane.SERVICE_CIDR: `kubernetes`
API_PORT = 443
KWOK_TAINT = {"key": "compactor.dev/kwok-node", "value": "true", "effect": "NoSchedule"}
KWOK_TOLERATION = {"key": KWOK_TAINT["key"], "operator": "Equal", "value": KWOK_TAINT["value"],
                   "effect": KWOK_TAINT["effect"]}


def node_bin() -> Path:
    """The node's binaries, built first if the pins changed (tools/build-node.sh)."""
    override = os.environ.get("COMPACTOR_NODE_BIN")
    return Path(override) if override else built("build-node.sh")


@dataclass(frozen=True)
class NodeConfig:
    workdir: Path
    images: tuple[Path, ...] = ()  # OCI or docker archives, imported before any Pod
    node_name: str = "real-node"
    bin_dir: Path = field(default_factory=tools_bin)
    node_bin_dir: Path = field(default_factory=node_bin)
    start_timeout: float = 120.0


class NodeCluster:
    """The control plane, a real node and kwok, started in order and torn down completely:
    every process by its PID, every mount under the work directory, the kubelet's cgroups."""

    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.dir = config.workdir
        self.name = config.node_name
        # One tree per work directory, so two harnesses never share a cgroup.
        digest = hashlib.sha256(str(self.dir.resolve()).encode()).hexdigest()[:12]
        self.cgroup_root = f"/compactor-node-{digest}"
        self.containerd_paths = ContainerdPaths(
            base=self.dir / "containerd", bin_dir=config.node_bin_dir,
            cni_bin_dir=config.node_bin_dir.parent / "cni", cni_conf_dir=self.dir / "cni" / "net.d")
        node_pki = self.dir / "node-pki"
        self.kubelet_paths = KubeletPaths(
            base=self.dir / "kubelet", runtime_socket=self.containerd_paths.socket,
            client_ca=node_pki / "ca.crt", serving_cert=node_pki / "kubelet.crt",
            serving_key=node_pki / "kubelet.key")
        self.cluster = Cluster(ClusterConfig(
            workdir=self.dir / "control-plane", bin_dir=config.bin_dir,
            start_timeout=config.start_timeout,
            api_port=API_PORT, bind_address="0.0.0.0", advertise_address=netns.NODE_IP,
            apiserver_flags=(
                # A webhook behind a Service is dialled at its endpoint (the Pod's address).
                "--enable-aggregator-routing=true",
                f"--kubelet-client-certificate={node_pki / 'apiserver-kubelet-client.crt'}",
                f"--kubelet-client-key={node_pki / 'apiserver-kubelet-client.key'}",
                f"--kubelet-certificate-authority={node_pki / 'ca.crt'}",
                "--kubelet-preferred-address-types=InternalIP",  # no DNS in the namespace
            )))
        self.processes: list[Process] = []
        # Each imported image's tag -> its name by digest (docker.io/library/x:t -> ...@sha256:).
        self.by_digest: dict[str, str] = {}
        self._bridge = False

    # --- lifecycle ---------------------------------------------------------------

    def __enter__(self) -> NodeCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self) -> Kube:
        return self.cluster.client()

    def start(self) -> NodeCluster:
        netns.require_isolated()
        try:
            cni.add_bridge(SERVICE_IP)
            self._bridge = True
            netns.require_isolated()
            self._write_node_pki()
            self._start_containerd()
            # Importing a large image takes longer than the control plane takes to start.
            with ThreadPoolExecutor(1) as pool:
                imported = pool.submit(self._import_images)
                self.cluster.start()
                self.cluster.start_workers()
                imported.result()
            self._start_kubelet()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        problems = []
        kubelet_proc = self._process("kubelet")
        if kubelet_proc is not None and kubelet_proc.running():
            with contextlib.suppress(Exception):
                self._delete_pods(timeout=30.0)
            kubelet_proc.stop()
        # What the kubelet did not stop: the Pods' processes (by PID, from its cgroups),
        # then the shims of our containerd (by PID, from their argv), then containerd.
        for pid in kubelet.cgroup_pids(self.cgroup_root):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        for pid in containerd.shims(self.containerd_paths):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 15)
        _wait_gone(lambda: bool(containerd.shims(self.containerd_paths)), 10.0)
        for pid in containerd.shims(self.containerd_paths):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        for proc in reversed(self.processes):
            proc.stop()
        self.processes.clear()
        problems += kubelet.remove_cgroup_root(self.cgroup_root)
        problems += unmount_under(self.dir)
        self.cluster.stop()
        if self._bridge:
            cni.remove_bridge(SERVICE_IP)
            self._bridge = False
        if problems:
            raise RuntimeError("real node teardown left: " + "; ".join(problems))

    # --- kwok nodes ----------------------------------------------------------------

    def add_kwok_nodes(self, names: list[str], shape: NodeShape | None = None,
                       labels: dict[str, str] | None = None) -> None:
        """kwok nodes tainted with ``KWOK_TAINT``: only Pods that tolerate it run there."""
        kube = self.client()
        try:
            self.cluster.add_nodes(kube, names, shape or NodeShape(), labels, wait=True)
            for name in names:
                kube.patch(path("nodes", name=name), {"spec": {"taints": [KWOK_TAINT]}})
        finally:
            kube.close()

    # --- the node ------------------------------------------------------------------

    def _process(self, name: str) -> Process | None:
        return next((p for p in self.processes if p.name == name), None)

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Process:
        proc = Process(name, argv, self.dir / "logs" / f"{name}.log", env=env)
        proc.start()
        self.processes.append(proc)
        return proc

    def _write_node_pki(self) -> None:
        """A CA of the node's own: it signs the kubelet's serving certificate and the client
        certificate the API server calls the kubelet with (logs, exec)."""
        out = self.kubelet_paths.client_ca.parent
        out.mkdir(parents=True, exist_ok=True)
        ca = pki.CertificateAuthority("compactor-node-ca")
        ca.pair.write(out, "ca")
        ca.serving([self.name, "localhost"], [netns.NODE_IP, "127.0.0.1"]).write(out, "kubelet")
        ca.client("kube-apiserver-kubelet-client", []).write(out, "apiserver-kubelet-client")

    def _start_containerd(self) -> None:
        paths = self.containerd_paths
        paths.base.mkdir(parents=True, exist_ok=True)
        cni.write(paths.cni_conf_dir, self.dir / "cni" / "ipam")
        paths.config.write_text(containerd.config(paths))
        proc = self._spawn("containerd", [str(paths.bin_dir / "containerd"),
                                          f"--config={paths.config}", "--log-level=warn"],
                           env=containerd.environment(paths))

        def ready() -> bool:
            return paths.socket.exists() and containerd.images(paths) is not None
        proc.wait_healthy(ready, self.config.start_timeout)

    def _import_images(self) -> None:
        for archive in self.config.images:
            containerd.import_image(self.containerd_paths, archive)
        self.by_digest = containerd.add_digest_references(self.containerd_paths)

    def _start_kubelet(self) -> None:
        paths = self.kubelet_paths
        paths.root.mkdir(parents=True, exist_ok=True)
        cluster = self.cluster
        cluster.ca.client(f"system:node:{self.name}", ["system:nodes"]).write(
            paths.base, "client")
        kubeconfig = paths.base / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "node",
            "clusters": [{"name": "local", "cluster": {
                "server": cluster.server, "certificate-authority": str(cluster.pki / "ca.crt")}}],
            "users": [{"name": "node", "user": {
                "client-certificate": str(paths.base / "client.crt"),
                "client-key": str(paths.base / "client.key")}}],
            "contexts": [{"name": "node", "context": {"cluster": "local", "user": "node"}}],
        }))
        paths.config.write_text(kubelet.config(paths, netns.NODE_IP, self.cgroup_root))
        kubelet.create_cgroup_root(self.cgroup_root)
        record = os.environ.get(netns.CGROUPS_ENV)
        if record:
            with open(record, "a") as out:
                out.write(self.cgroup_root + "\n")
        proc = self._spawn("kubelet", kubelet.argv(self.config.node_bin_dir, paths, kubeconfig,
                                                   self.name, netns.NODE_IP))
        proc.wait_healthy(
            lambda: httpx.get(f"http://127.0.0.1:{kubelet.HEALTHZ_PORT}/healthz",
                              timeout=1).status_code == 200, self.config.start_timeout)
        kube = self.client()
        try:
            proc.wait_healthy(lambda: _ready(kube.find(path("nodes", name=self.name))),
                              self.config.start_timeout)
        finally:
            kube.close()

    def _delete_pods(self, timeout: float) -> None:
        kube = self.client()
        try:
            url = path("pods")
            selector = {"fieldSelector": f"spec.nodeName={self.name}"}

            def on_node() -> list[dict[str, object]]:
                return list(kube.request("GET", url, params=selector).get("items", []))
            for pod in on_node():
                meta = pod["metadata"]
                assert isinstance(meta, dict)
                kube.delete(path("pods", meta["namespace"], meta["name"]))
            _wait_gone(lambda: bool(on_node()), timeout)
        finally:
            kube.close()


def _ready(node: dict[str, object] | None) -> bool:
    status = node.get("status") if node else None
    conditions = status.get("conditions", []) if isinstance(status, dict) else []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _wait_gone(present: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while present() and time.monotonic() < deadline:
        time.sleep(0.2)


def mounts_under(directory: Path) -> list[Path]:
    """Mount points at or below ``directory`` in this mount namespace, deepest first."""
    top = str(directory.resolve())
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")
        if point == top or point.startswith(top + "/"):
            found.append(Path(point))
    return sorted(found, key=lambda p: -len(p.parts))


def unmount_under(directory: Path) -> list[str]:
    """Unmount what containerd and the kubelet left mounted (rootfs overlays, tmpfs volumes,
    network namespaces); returns what stayed mounted."""
    for point in mounts_under(directory):
        done = subprocess.run(["umount", str(point)], check=False, capture_output=True)
        if done.returncode != 0:
            subprocess.run(["umount", "--lazy", str(point)], check=False, capture_output=True)
    return [f"{p} is still mounted" for p in mounts_under(directory)]
