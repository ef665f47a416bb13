"""Shared pieces of integration tests: small manifests and waits. The webhook process and
RBAC helpers live in localcluster.cluster.stack, which the demo uses too."""

from __future__ import annotations

import contextlib
import datetime
import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from controller.components.pod_settings import RuntimeSettings
from controller.plan.settings import PlanSettings
from localcluster import ApiError, Cluster, Kube
from localcluster.cluster.control_plane import MANUAL_STATUS, ROOT, NodeShape
from localcluster.cluster.kube import path, wait_for
from localcluster.cluster.process import free_port
from localcluster.cluster.stack import (
    WEBHOOK_NAMESPACE_LABEL,
    RunningWebhook,
    apply_file,
    run_webhook,
    service_account_token,
    start_webhook_process,
    token_kubeconfig,
    webhook_configuration,
    webhook_metric,
)

PAUSE = "registry.k8s.io/pause:3.10"
__all__ = ["ROOT", "WEBHOOK_NAMESPACE_LABEL", "RunningWebhook", "apply_file", "run_webhook",
           "service_account_token", "start_webhook_process", "token_kubeconfig",
           "webhook_configuration", "webhook_metric"]


class AheadClock:
    """The wall clock moved on by ``ahead``, for code that takes a clock: a test passes a
    period (an overlap, a suppression) by moving it instead of waiting the period out."""

    def __init__(self) -> None:
        self.ahead = datetime.timedelta()

    def __call__(self) -> datetime.datetime:
        return datetime.datetime.now(datetime.UTC) + self.ahead


def own_pool(cluster: Cluster, kube: Kube, suffixes: Sequence[str]) -> tuple[str, list[str]]:
    """Fresh nodes of one shape (4 CPU, 16 GiB) in a pool of their own, labelled
    ``compactor.test/pool=<pool>``, so that other tests' Pods don't count."""
    pool_name = f"pool-{uuid.uuid4().hex[:5]}"
    nodes = [f"{pool_name}-{s}" for s in suffixes]
    cluster.add_nodes(kube, nodes, NodeShape(cpu="4", memory="16Gi", pods="110"),
                      labels={"compactor.test/pool": pool_name})
    return pool_name, nodes


def pod_template(labels: dict[str, str], cpu: str = "100m") -> dict[str, Any]:
    return {"metadata": {"labels": labels}, "spec": {"containers": [{
        "name": "app", "image": PAUSE,
        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}}


def deployment(name: str, replicas: int, cpu: str = "100m",
               annotations: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": pod_template(labels, cpu)},
    }


def running_pods(kube: Kube, ns: str, selector: str, count: int) -> list[dict[str, Any]] | None:
    pods = kube.items(path("pods", ns), selector)
    running = [p for p in pods if p["status"].get("phase") == "Running"]
    return running if len(running) == count else None


def pods_of(kube: Kube, ns: str, selector: str, count: int) -> list[dict[str, Any]]:
    return wait_for(f"{count} pods with {selector}", lambda: (
        lambda pods: pods if len(pods) >= count else None)(kube.items(path("pods", ns), selector)))


def gone(kube: Kube, url: str) -> bool:
    try:
        kube.get(url)
    except ApiError as e:
        return e.status == 404
    return False


def pinned_replica_set(name: str, node: str, replicas: int, cpu: str,
                       labels: dict[str, str]) -> dict[str, Any]:
    """A ReplicaSet whose Pods sit on one node (nodeName), as if a scheduler had put them there."""
    sel = {"app": name}
    template = pod_template({**sel, **labels}, cpu)
    template["spec"]["nodeName"] = node
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": sel},
                     "template": template}}


def run_pinned(kube: Kube, namespace: str,
               sets: Sequence[tuple[str, str, int, str, dict[str, str]]]) -> None:
    """Pinned ReplicaSets (name, node, replicas, cpu, labels) created, and waited for until
    all their Pods run."""
    for name, node, replicas, cpu, labels in sets:
        kube.create(path("replicasets", namespace),
                    pinned_replica_set(name, node, replicas, cpu, labels))
    for name, _, replicas, _, _ in sets:
        def up(a: str = name, c: int = replicas) -> list[dict[str, Any]] | None:
            return running_pods(kube, namespace, f"app={a}", c)
        wait_for(f"{name} running", up)


def descheduler_dry_run(cluster: Cluster, policy: dict[str, Any], workdir: Path,
                        ready: Callable[[str], bool], attempts: int = 30) -> str:
    """The real descheduler's ``--dry-run`` of one DeschedulerPolicy; its log.

    Its informers sometimes start before they have listed the Pods (every node then shows 0%
    and nothing is planned), so it runs again until ``ready`` finds in the log that its
    snapshot held what the test set up. A run that fails is an error at once."""
    file = workdir / "policy.yaml"
    file.write_text(yaml.safe_dump(policy))
    log = ""
    for _ in range(attempts):
        out = subprocess.run(
            [str(cluster.bin / "descheduler"), f"--kubeconfig={cluster.kubeconfig}",
             f"--policy-config-file={file}", "--dry-run", "--v=4",
             "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
             f"--cert-dir={workdir / 'certs'}"],
            capture_output=True, text=True, timeout=120, check=False)
        log = out.stdout + out.stderr
        (workdir / "descheduler.log").write_text(log)
        assert out.returncode == 0, log[-3000:]
        if ready(log):
            return log
        time.sleep(0.5)
    raise AssertionError(f"the descheduler's snapshot never held the test's Pods:\n{log[-3000:]}")


# Matches no Pod and no namespace: no test object carries this label.
_NOTHING = {"matchExpressions": [{"key": "compactor.test/witness", "operator": "Exists"}]}


def with_witness(policy: dict[str, Any]) -> dict[str, Any]:
    """``policy`` with a profile run before its own that evicts nothing and names every Pod on
    its nodes in the log (at ``--v=4``): a Pod without the descheduler's evict annotation fails
    the witness evictor's label selector, and one with it passes that filter (the annotation
    skips it) and fails its namespace selector. Profiles run in order and the dry run's copy
    of the cluster only grows meanwhile, so a Pod the witness named was in the snapshot the
    policy's own profile read: a Pod it left alone was seen, not missed."""
    witness = {
        "name": "compactor-test-witness",
        "pluginConfig": [
            {"name": "DefaultEvictor", "args": {"nodeFit": False, "labelSelector": _NOTHING,
                                                "namespaceLabelSelector": _NOTHING}},
            {"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 0}},
        ],
        "plugins": {"filter": {"enabled": ["DefaultEvictor"]},
                    "preevictionfilter": {"enabled": ["DefaultEvictor"]},
                    "deschedule": {"enabled": ["PodLifeTime"]}},
    }
    return {**policy, "profiles": [witness, *policy["profiles"]]}


def named_pods(log: str) -> set[str]:
    """Every Pod (namespace/name) a descheduler log names."""
    return set(re.findall(r'pod="([^"]+)"', log))


def evicted_in_dry_run(log: str) -> dict[str, tuple[str, str]]:
    """The Pods a dry run evicted (namespace/name), each with its plugin and profile."""
    out = {}
    for line in log.splitlines():
        if "Evicted pod in dry run mode" in line:
            fields = dict(re.findall(r'(\w+)="([^"]*)"', line))
            out[fields["pod"]] = (fields["strategy"], fields["profile"])
    return out


def _crd(group: str, version: str, kind: str, plural: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
                 "versions": [{"name": version, "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object",
                                         "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


# Stand-ins for the CRDs of Argo Rollouts, Strimzi and KubeAI: the kinds exist and are served,
# no controller of theirs runs (tests create what those controllers would create).
FOREIGN_CRDS = (
    _crd("argoproj.io", "v1alpha1", "Rollout", "rollouts"),
    _crd("argoproj.io", "v1alpha1", "AnalysisRun", "analysisruns"),
    _crd("core.strimzi.io", "v1beta2", "StrimziPodSet", "strimzipodsets"),
    _crd("kubeai.org", "v1", "Model", "models"),
)


def install_foreign_crds(kube: Kube) -> None:
    for crd in FOREIGN_CRDS:
        kube.apply(path("customresourcedefinitions", name=crd["metadata"]["name"]), crd)
    for crd in FOREIGN_CRDS:
        api = f"/apis/{crd['spec']['group']}/{crd['spec']['versions'][0]['name']}"
        plural = crd["spec"]["names"]["plural"]

        def served(a: str = api, p: str = plural) -> bool:
            return any(r["name"] == p for r in kube.get(a).get("resources", []))
        wait_for(f"{plural} served", served)


def owner_ref(obj: dict[str, Any]) -> dict[str, Any]:
    """A controller ownerReference to ``obj``, as its controller would set it."""
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
            "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}


def hold_running(kube: Kube, ns: str) -> int:
    """Mark Running every bound Pod that kwok leaves alone (annotated
    ``compactor.test/kwok-status: manual``), as a kubelet would while its work goes on (kwok
    itself completes a Job's Pods at once). Returns how many are Running."""
    running = 0
    for pod in kube.items(path("pods", ns)):
        meta, spec = pod["metadata"], pod["spec"]
        if (meta.get("annotations") or {}).get(MANUAL_STATUS) != "manual":
            continue
        if pod["status"].get("phase") != "Running" and spec.get("nodeName"):
            kube.patch(path("pods", ns, meta["name"], sub="status"), {"status": {
                "phase": "Running", "podIP": "10.0.64.250",
                "conditions": [{"type": t, "status": "True"}
                               for t in ("Initialized", "Ready", "ContainersReady",
                                         "PodScheduled")],
                "containerStatuses": [{"name": c["name"], "image": c["image"], "ready": True,
                                       "restartCount": 0, "imageID": "", "started": True,
                                       "state": {"running": {}}}
                                      for c in spec["containers"]]}})
        running += 1
    return running


# The plan's settings for controllers the tests run in-process. The harness runs the
# compaction scheduler as a process of its own (or not at all), never from the Deployment the
# controller writes (no kubelet runs its Pod), so that Deployment never has an available
# replica: judged by the default 30 s, every test after the first half minute would send new
# Pods to the default scheduler. The tests of that fallback set their own.
HARNESS_PLAN = PlanSettings(RuntimeSettings(), scheduler_down_after=datetime.timedelta(days=1))


@contextlib.contextmanager
def an_older_crd(kube: Kube, plural: str) -> Iterator[None]:
    """The policy CRD as it was before the interval's range checks (five fields were all it
    asked) while the block runs; then today's again. Objects written meanwhile stay stored as
    they were, as ones written under an older release do; the API server refuses them today,
    so this is the only way one still reaches the controller."""
    crd_path = path("customresourcedefinitions", name=f"{plural}.compactor.dev")
    today = kube.get(crd_path)
    older = yaml.safe_load(yaml.safe_dump(today))
    for version in older["spec"]["versions"]:
        interval = (version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
                    ["descheduler"]["properties"]["interval"])
        interval["x-kubernetes-validations"] = interval["x-kubernetes-validations"][:1]
    for crd in (older, today):
        crd["metadata"] = {"name": crd["metadata"]["name"]}
        crd.pop("status", None)
    bad = {"apiVersion": "compactor.dev/v1alpha1", "kind": older["spec"]["names"]["kind"],
           "metadata": {"name": f"older-crd-probe-{uuid.uuid4().hex[:6]}"},
           "spec": {"descheduler": {"interval": "61 * * * *"}}}
    namespaced = older["spec"]["scope"] == "Namespaced"
    collection = path(plural, "default" if namespaced else None,
                      api="apis/compactor.dev/v1alpha1")
    kube.apply(crd_path, older)
    try:
        wait_for("the older CRD in force", lambda: not _refused(kube, collection, bad),
                 timeout=30)
        yield
    finally:
        kube.apply(crd_path, today)
        wait_for("today's CRD in force", lambda: _refused(kube, collection, bad), timeout=30)


def admitted_by_an_older_crd(kube: Kube, plural: str, namespace: str | None,
                             body: dict[str, Any]) -> dict[str, Any]:
    """``body`` created under ``an_older_crd``."""
    with an_older_crd(kube, plural):
        made: dict[str, Any] = kube.create(
            path(plural, namespace, api="apis/compactor.dev/v1alpha1"), body)
    return made


def _refused(kube: Kube, collection: str, body: dict[str, Any]) -> bool:
    try:
        kube.create(collection, body, dry_run=True)
    except ApiError as e:
        return e.status == 422
    return False


def clear_waiting_on_compaction_scheduler(kube: Kube, keep: str = "") -> None:
    """Delete the Pods other tests left unbound on the compaction scheduler (none runs for
    them here): the controller keeps the scheduler while any waits for it. ``keep``: a
    namespace whose Pods stay."""
    for pod in kube.items(path("pods")):
        meta, spec = pod["metadata"], pod["spec"]
        if (spec.get("schedulerName") == "compactor-scheduler" and not spec.get("nodeName")
                and meta["namespace"] != keep):
            kube.delete(path("pods", meta["namespace"], meta["name"]))
