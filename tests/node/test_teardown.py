"""A real node leaves nothing behind: after the cluster stops, no process runs in its network
namespace, nothing is mounted under its work directory and the kubelet's cgroups are gone.

It runs a cluster of its own in a nested launcher (a fresh namespace: the session's cluster
holds the bridge and port 443 of this one) and reads what is left from inside."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from localcluster.node import containerd
from tests.node.conftest import images

CYCLE = """
import json, sys, time
from pathlib import Path
from localcluster.cluster.kube import path
from localcluster.node import containerd, kubelet, netns
from localcluster.node.cluster import NodeCluster, NodeConfig, mounts_under

workdir = Path(sys.argv[1])
archives = tuple(Path(a) for a in sys.argv[2:])
with NodeCluster(NodeConfig(workdir=workdir, images=archives)) as node:
    kube = node.client()
    kube.create(path("pods", "default"), {"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "pause"}, "spec": {"containers": [{"name": "pause",
        "image": containerd.SANDBOX_IMAGE, "imagePullPolicy": "Never"}]}})
    deadline = time.monotonic() + 90
    while kube.get(path("pods", "default", "pause"))["status"].get("phase") != "Running":
        assert time.monotonic() < deadline, "pause never ran"
        time.sleep(0.2)
    during = {"processes": len(netns.others()), "mounts": len(mounts_under(workdir)),
              "cgroup": len(kubelet.cgroup_pids(node.cgroup_root))}
    kube.close()
root = node.cgroup_root.strip("/")
print(json.dumps({
    "during": during,
    "processes": netns.others(),
    "mounts": [str(m) for m in mounts_under(workdir)],
    "cgroups": [str(p) for p in Path("/sys/fs/cgroup").glob(f"*/{root}")],
    "bridge": [link.name for link in netns.links() if link.name != "lo"],
}))
"""


def test_stop_leaves_no_process_mount_or_cgroup(tmp_path: Path) -> None:
    pause = [str(a) for a, tag in images().items() if tag == containerd.SANDBOX_IMAGE]
    done = subprocess.run(
        [sys.executable, "-m", "localcluster.node", "--", sys.executable, "-c", CYCLE,
         str(tmp_path / "work"), *pause],
        check=False, capture_output=True, text=True, timeout=300, env=os.environ.copy())
    assert done.returncode == 0, done.stderr[-3000:]
    left = json.loads(done.stdout.strip().splitlines()[-1])
    assert left["during"]["processes"] >= 6  # etcd, apiserver, kcm, scheduler, kwok, ...
    assert left["during"]["mounts"] > 0 and left["during"]["cgroup"] > 0
    assert left["processes"] == []
    assert left["mounts"] == []
    assert left["cgroups"] == []
    assert left["bridge"] == []
    assert "leftover process" not in done.stderr  # the launcher's sweep found nothing


KILLED = """
import os, signal, sys, time
from pathlib import Path
from localcluster.cluster.kube import path
from localcluster.node import containerd
from localcluster.node.cluster import NodeCluster, NodeConfig

node = NodeCluster(NodeConfig(workdir=Path(sys.argv[1]), images=(Path(sys.argv[2]),))).start()
kube = node.client()
kube.create(path("pods", "default"), {"apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "pause"}, "spec": {"containers": [{"name": "pause",
    "image": containerd.SANDBOX_IMAGE, "imagePullPolicy": "Never"}]}})
deadline = time.monotonic() + 90
while kube.get(path("pods", "default", "pause"))["status"].get("phase") != "Running":
    assert time.monotonic() < deadline, "pause never ran"
    time.sleep(0.2)
print(node.cgroup_root, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no teardown runs
"""


def test_the_launcher_ends_what_a_killed_harness_left(tmp_path: Path) -> None:
    """The harness dies with its Pods running: the launcher ends the processes left in its
    namespace and the Pods' processes (in namespaces of their own) by their cgroup, and
    removes the kubelet's cgroup tree."""
    pause = [str(a) for a, tag in images().items() if tag == containerd.SANDBOX_IMAGE]
    done = subprocess.run(
        [sys.executable, "-m", "localcluster.node", "--", sys.executable, "-c", KILLED,
         str(tmp_path / "work"), *pause],
        check=False, capture_output=True, text=True, timeout=300, env=os.environ.copy())
    assert done.returncode == 128 + 9, done.stderr[-3000:]  # the harness's SIGKILL
    root = done.stdout.strip().splitlines()[-1].strip("/")
    assert root.startswith("compactor-node-")
    assert "leftover process" in done.stderr  # etcd, the API server, containerd, a shim, ...
    assert list(Path("/sys/fs/cgroup").glob(f"*/{root}")) == []
