"""Compactor installed with its Helm chart on the real node, as the install guide says: only the
image values set, into compactor-system or another release namespace, the Service-based webhook
``clientConfig`` unchanged (which only the real node's isolated network namespace allows), and
everything removed again afterwards so the next module starts on a clean cluster.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcluster import Kube
from localcluster.cluster.control_plane import ROOT, Cluster
from localcluster.cluster.kube import path, wait_for
from localcluster.node import netns
from localcluster.node.install import NAMESPACE, deployment, kubectl, wait_available
from tests.node.conftest import image

CHART = ROOT / "deploy" / "helm" / "compactor"
NS = NAMESPACE
RELEASE = "compactor"
APPS = "apis/apps/v1"
BATCH = "apis/batch/v1"
POLICIES = "apis/compactor.dev/v1alpha1"
CRDS = ("clustercompactionpolicies", "compactionpolicies", "policyevaluations",
        "staticpolicies", "clusterstaticpolicies")
# Two shared cores, other real-node runs beside this one: minutes, not seconds.
READY = 300.0


@functools.cache
def compactor_image() -> str:
    """Compactor's tag among the images tools/build-images.sh built (read once: a later build
    may replace that directory while the tests run)."""
    return image("compactor")


@dataclass(frozen=True)
class Helm:
    """helm against the real node's API server, its cache and config in a folder of the test's."""

    cluster: Cluster
    home: Path
    namespace: str = NS  # the release's

    def run(self, *args: str, check: bool = True,
            timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "HELM_CACHE_HOME": str(self.home / "cache"),
               "HELM_CONFIG_HOME": str(self.home / "config"),
               "HELM_DATA_HOME": str(self.home / "data")}
        done = subprocess.run([str(self.cluster.bin / "helm"),
                               f"--kubeconfig={self.cluster.kubeconfig}", *args],
                              check=False, capture_output=True, text=True, env=env,
                              timeout=timeout)
        if check and done.returncode != 0:
            raise RuntimeError(f"helm {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done

    def _why_the_scheduler_stays(self, kube: Kube) -> str:
        """What a failed wait for the scheduler's removal needs to be understood: the Pods that
        still name the scheduler unbound (it stays for them), the controller's Events about
        it, and the end of the controller's log."""
        waiting = [f"{p['metadata']['namespace']}/{p['metadata']['name']}"
                   for p in kube.items(path("pods"))
                   if p["spec"].get("schedulerName") == "compactor-scheduler"
                   and not p["spec"].get("nodeName")]
        events = [f"{e.get('reason')}: {e.get('message')}"
                  for e in kube.items(path("events", self.namespace))
                  if e["involvedObject"].get("name") == "compactor-scheduler"]
        logs = kubectl(self.cluster, "logs", "-n", self.namespace,
                       "deployment/compactor-controller", "--tail=60", check=False)
        return (f"unbound Pods naming compactor-scheduler: {waiting}\nits Events: {events}\n"
                f"the controller's log:\n{logs.stdout}{logs.stderr}")

    def install(self, image: str, *sets: str) -> str:
        """``helm install`` with the image values (and ``sets``); refused outside the real
        node's namespace, where the API server would dial the webhook Service's endpoints on
        the host's network."""
        netns.require_isolated()
        repository, tag = image.rsplit(":", 1)
        args = ["install", RELEASE, str(CHART), "-n", self.namespace, "--create-namespace",
                "--set", f"image.repository={repository}", "--set", f"image.tag={tag}"]
        for s in sets:
            args += ["--set", s]
        return self.run(*args).stdout

    def uninstall(self, kube: Kube) -> None:
        """What the install guide says removes everything: the policies first (the controller
        removes the scheduler, garbage collection the CronJobs), ``helm uninstall``, the CRDs
        and the namespace; returns once the namespace is gone."""
        for plural in ("clustercompactionpolicies", "compactionpolicies"):
            if kube.find(path(plural, api=POLICIES)) is not None:
                kubectl(self.cluster, "delete", plural, "--all", "--all-namespaces",
                        "--wait=true", "--timeout=120s", check=False)
        ns = self.namespace
        if deployment(kube, "compactor-controller", ns) is not None:
            try:
                wait_for("the controller to remove the compaction scheduler", lambda: deployment(
                    kube, "compactor-scheduler", ns) is None or None, 120.0, 1.0)
            except TimeoutError as e:
                raise TimeoutError(f"{e}\n{self._why_the_scheduler_stays(kube)}") from e
        self.run("uninstall", RELEASE, "-n", ns, "--wait", "--timeout=180s", check=False,
                 timeout=240.0)
        kubectl(self.cluster, "delete", "crd", *(f"{c}.compactor.dev" for c in CRDS),
                "--ignore-not-found", "--wait=true", "--timeout=120s", check=False)
        kube.delete(path("namespaces", name=ns))
        wait_for(f"namespace {ns} gone", lambda: kube.find(
            path("namespaces", name=ns)) is None or None, READY, 1.0)


@contextlib.contextmanager
def installed(cluster: Cluster, kube: Kube, home: Path, namespace: str = NS,
              sets: tuple[str, ...] = ()) -> Iterator[Helm]:
    """Compactor installed with only the image values (those of ``sets`` too) into
    ``namespace``, both Deployments available; uninstalled as the guide says on the way out,
    whatever happened."""
    helm = Helm(cluster, home, namespace)
    try:
        helm.install(compactor_image(), *sets)
        wait_available(kube, READY, namespace)
        yield helm
    finally:
        helm.uninstall(kube)


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c.get("type") == kind), {})


def events(kube: Kube, namespace: str, name: str) -> list[dict[str, Any]]:
    """core/v1 Events about ``name`` in ``namespace``."""
    return [e for e in kube.items(path("events", namespace))
            if e["involvedObject"].get("name") == name]
