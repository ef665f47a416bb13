"""Installing Compactor on the real node as its users do: a copy of deploy/ whose only change is
``kustomize edit set image compactor=<image>`` (docs/install.md), or for another namespace an
overlay of that copy that sets the namespace and the image, applied with
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

import httpx

from compaction import names
from localcluster.cluster import scrape
from localcluster.cluster.control_plane import ROOT, Cluster
from localcluster.cluster.kube import Kube, path, wait_for
from localcluster.node import netns

DEPLOY = ROOT / "deploy"
NAMESPACE = names.INSTALL_NAMESPACE


def kustomize() -> Path:
    """kustomize as tools/build-node.sh builds it, beside the kubelet (the launcher passes its
    directory in COMPACTOR_NODE_BIN)."""
    where = os.environ.get("COMPACTOR_NODE_BIN")
    binary = Path(where) / "kustomize" if where else None
    if binary is None or not binary.exists():
        raise FileNotFoundError("kustomize is not built: run tools/build-node.sh and start the "
                                "tests through `python -m localcluster.node`")
    return binary


def _kustomize(directory: Path, *args: str) -> None:
    subprocess.run([str(kustomize()), *args], cwd=directory, check=True, capture_output=True,
                   text=True, timeout=60)


def kustomization(image: str, workdir: Path, namespace: str = NAMESPACE) -> Path:
    """deploy/ copied to ``workdir`` with Compactor's image set, and nothing else changed; for
    another ``namespace``, an overlay beside the unchanged copy that sets the namespace and the
    image (``kustomize create --resources ../deploy --namespace``, docs/install.md). Returns
    the directory to apply."""
    target = workdir / "deploy"
    shutil.copytree(DEPLOY, target)
    if namespace != NAMESPACE:
        target = workdir / "overlay"
        target.mkdir()
        _kustomize(target, "create", "--resources", "../deploy", "--namespace", namespace)
    _kustomize(target, "edit", "set", "image", f"compactor={image}")
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


def deployment(kube: Kube, name: str, namespace: str = NAMESPACE) -> dict[str, Any] | None:
    return kube.find(path("deployments", namespace, name, api="apis/apps/v1"))


def available(kube: Kube, name: str, replicas: int,
              namespace: str = NAMESPACE) -> dict[str, Any] | None:
    """The Deployment once ``replicas`` of its current generation are available (and no
    others left from a rollout)."""
    found = deployment(kube, name, namespace)
    status = (found or {}).get("status") or {}
    done = (status.get("availableReplicas", 0) == replicas
            and status.get("updatedReplicas", 0) == replicas
            and status.get("replicas", 0) == replicas
            and status.get("observedGeneration") == (found or {}).get("metadata", {})
            .get("generation"))
    return found if done else None


def component_pods(kube: Kube, component: str,
                   namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """The Pods of one of Compactor's components (its ``app.kubernetes.io/component``), not
    those already on their way out."""
    return [p for p in kube.items(path("pods", namespace),
                                  f"app.kubernetes.io/component={component}")
            if not p["metadata"].get("deletionTimestamp")]


def lease_holder(kube: Kube, namespace: str = NAMESPACE) -> str | None:
    """The controller replica holding its Lease."""
    lease = kube.find(path("leases", namespace, "compactor-controller",
                           api="apis/coordination.k8s.io/v1"))
    return str((lease or {}).get("spec", {}).get("holderIdentity") or "") or None


def leader_metrics(controller_pods: list[dict[str, Any]]) -> dict[str, float]:
    """Each controller replica's own view of leadership (``compactor_controller_leader``),
    read at its address."""
    return {p["metadata"]["name"]: scrape.sample(httpx.get(
        f"http://{p['status']['podIP']}:8080/metrics", timeout=5).text,
        "compactor_controller_leader") for p in controller_pods}


def wait_available(kube: Kube, timeout: float, namespace: str = NAMESPACE) -> None:
    """Both webhook and both controller replicas available, as the manifests ask."""
    wait_for("the webhook's two replicas available",
             lambda: available(kube, "compactor-webhook", 2, namespace), timeout, 1.0)
    wait_for("the controller's two replicas available",
             lambda: available(kube, "compactor-controller", 2, namespace), timeout, 1.0)
