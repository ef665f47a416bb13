"""The kubelet's configuration and the cgroup tree it owns.

cgroup v1 (this kind of machine) needs ``failCgroupV1: false``; ``cgroupRoot`` puts every Pod
under one tree of the harness's own, which the kubelet requires to exist and which teardown
removes (after ending whatever still runs in it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

CGROUP_FS = Path("/sys/fs/cgroup")
PORT = 10250
HEALTHZ_PORT = 10248


@dataclass(frozen=True)
class KubeletPaths:
    base: Path
    runtime_socket: Path
    client_ca: Path  # who may call the kubelet's API (the API server's kubelet-client cert)
    serving_cert: Path
    serving_key: Path

    @property
    def config(self) -> Path:
        return self.base / "config.yaml"

    @property
    def root(self) -> Path:
        return self.base / "root"


def config(paths: KubeletPaths, node_ip: str, cgroup_root: str) -> str:
    resolv = paths.base / "resolv.conf"
    resolv.write_text("")  # no DNS in the namespace: Pods get an empty resolv.conf
    return yaml.safe_dump({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "failCgroupV1": False, "failSwapOn": False,
        "cgroupDriver": "cgroupfs", "cgroupRoot": cgroup_root, "cgroupsPerQOS": True,
        "containerRuntimeEndpoint": f"unix://{paths.runtime_socket}",
        "address": node_ip, "port": PORT, "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1", "healthzPort": HEALTHZ_PORT,
        "tlsCertFile": str(paths.serving_cert), "tlsPrivateKeyFile": str(paths.serving_key),
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                           "x509": {"clientCAFile": str(paths.client_ca)}},
        "authorization": {"mode": "AlwaysAllow"},
        "resolvConf": str(resolv),
        "podLogsDir": str(paths.base / "pod-logs"),
        "volumePluginDir": str(paths.base / "volume-plugins"),
        # A shared test machine's disk is not this node's to guard: evict only when it is
        # all but full, and never collect the imported images (they cannot be pulled back).
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                         "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "nodeStatusUpdateFrequency": "4s",
        "rotateCertificates": False, "serverTLSBootstrap": False,
        "makeIPTablesUtilChains": False,
    }, sort_keys=False)


def argv(bin_dir: Path, paths: KubeletPaths, kubeconfig: Path, name: str,
         node_ip: str) -> list[str]:
    return [str(bin_dir / "kubelet"), f"--config={paths.config}", f"--kubeconfig={kubeconfig}",
            f"--root-dir={paths.root}", f"--cert-dir={paths.base / 'pki'}",
            f"--hostname-override={name}", f"--node-ip={node_ip}", "--v=1"]


def _hierarchies() -> list[Path]:
    """Each mounted cgroup v1 hierarchy (cpu, memory, ..., name=systemd); the unified one on v2."""
    if (CGROUP_FS / "cgroup.controllers").exists():
        return [CGROUP_FS]
    return sorted(p for p in CGROUP_FS.iterdir() if p.is_dir() and not p.is_symlink()
                  and (p / "cgroup.procs").exists())


def create_cgroup_root(cgroup_root: str) -> None:
    """The kubelet refuses a cgroupRoot that does not exist in every hierarchy."""
    for hierarchy in _hierarchies():
        path = hierarchy / cgroup_root.strip("/")
        path.mkdir(exist_ok=True)
        if hierarchy.name == "cpuset":  # a v1 cpuset child starts empty: give it its parent's
            for knob in ("cpuset.cpus", "cpuset.mems"):
                (path / knob).write_text((path.parent / knob).read_text())


def cgroup_pids(cgroup_root: str) -> set[int]:
    pids: set[int] = set()
    for hierarchy in _hierarchies():
        top = hierarchy / cgroup_root.strip("/")
        if not top.exists():
            continue
        for procs in top.rglob("cgroup.procs"):
            with contextlib.suppress(OSError):
                pids.update(int(p) for p in procs.read_text().split())
    return pids


def remove_cgroup_root(cgroup_root: str, grace: float = 10.0) -> list[str]:
    """End what still runs under the tree (the Pods' processes, by PID), then remove it
    deepest first. Returns what could not be removed."""
    deadline = time.monotonic() + grace
    while (pids := cgroup_pids(cgroup_root)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
    left = []
    for hierarchy in _hierarchies():
        top = hierarchy / cgroup_root.strip("/")
        if not top.exists():
            continue
        for path in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                path.rmdir()
        try:
            top.rmdir()
        except OSError as err:
            left.append(f"{top}: {err.strerror}")
    return left


def container_pid(cgroup_root: str, container_id: str) -> int:
    """The first process of a container on the node (found by its cgroup, which the kubelet's
    cgroupfs layout names after the container's ID)."""
    bare = container_id.split("://", 1)[-1]
    for hierarchy in _hierarchies():
        for procs in (hierarchy / cgroup_root.strip("/")).rglob(f"{bare}/cgroup.procs"):
            pids = [int(p) for p in procs.read_text().split()]
            if pids:
                return min(pids)
    raise LookupError(f"no process of container {bare} under {cgroup_root}")
