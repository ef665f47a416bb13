"""Installing Compactor on the real node as its users do: a copy of deploy/ whose only change is
``kustomize edit set image compactor=<image>`` (docs/install.md), applied with
``kubectl apply --server-side -k`` and removed with ``kubectl delete -k``.

The manifests' Service-based webhook ``clientConfig`` goes in unchanged, which only the real
node's isolated network namespace allows: ``apply`` checks that first.
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from localcluster.cluster.control_plane import ROOT, Cluster
from localcluster.node import netns

DEPLOY = ROOT / "deploy"
NAMESPACE = "compactor-system"


def kustomize() -> Path:
    """kustomize as tools/build-node.sh builds it, beside the kubelet (the launcher passes its
    directory in COMPACTOR_NODE_BIN)."""
    where = os.environ.get("COMPACTOR_NODE_BIN")
    binary = Path(where) / "kustomize" if where else None
    if binary is None or not binary.exists():
        raise FileNotFoundError("kustomize is not built: run tools/build-node.sh and start the "
                                "tests through `python -m localcluster.node`")
    return binary


def kustomization(image: str, workdir: Path) -> Path:
    """deploy/ copied to ``workdir`` with Compactor's image set, and nothing else changed."""
    target = workdir / "deploy"
    shutil.copytree(DEPLOY, target)
    subprocess.run([str(kustomize()), "edit", "set", "image", f"compactor={image}"],
                   cwd=target, check=True, capture_output=True, text=True, timeout=60)
    return target


def kubectl(cluster: Cluster, *args: str, timeout: float = 300.0,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(cluster.bin / "kubectl"), f"--kubeconfig={cluster.kubeconfig}",
                           *args], check=False, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done


def apply(cluster: Cluster, directory: Path) -> str:
    """``kubectl apply --server-side -k``; refused outside the real node's namespace, where the
    API server would dial the webhook Service's endpoints on the host's network."""
    netns.require_isolated()
    return kubectl(cluster, "apply", "--server-side", "-k", str(directory)).stdout


def uninstall(cluster: Cluster, directory: Path) -> None:
    """``kubectl delete -k``, waiting until the namespace (and every Pod in it) is gone."""
    kubectl(cluster, "delete", "-k", str(directory), "--ignore-not-found", "--wait=true",
            "--timeout=300s", timeout=360.0)


def timestamp(stamp: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def seconds_to_ready(pod: dict[str, Any]) -> float | None:
    """From the Pod's creation to its Ready condition, in the API's whole seconds."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready" and c.get("status") == "True":
            return (timestamp(c["lastTransitionTime"])
                    - timestamp(pod["metadata"]["creationTimestamp"])).total_seconds()
    return None
