"""The drain planner's verdict on each Pod against what the real descheduler evicts with the
config the controller rendered for it: Pod by Pod, one Pod for every blocker the planner
knows that this cluster can make, and one Pod that may move."""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from compaction import names
from controller.components.pod_settings import RuntimeSettings
from controller.plan.convergence import ConvergenceState
from controller.plan.decide import plan
from controller.plan.settings import PlanSettings
from controller.process.reconciler import Reconciler
from controller.snapshot.pod import PodInfo
from controller.snapshot.snapshot import Snapshot
from localcluster import ApiError, Cluster, Kube
from localcluster.cluster.control_plane import MANUAL_STATUS, NodeShape
from localcluster.cluster.kube import path, wait_for
from tests.integration.conftest import Policies
from tests.integration.helpers import (
    descheduler_dry_run,
    hold_running,
    named_pods,
    pod_template,
    with_witness,
)

# The planner's verdict on each Pod of the sparse node (by its ``app`` label): the code of
# the reason it keeps the node, or MOVABLE.
MOVABLE = "movable"
LEFT_IN_PLACE = "left_in_place"  # in no plan at all: DaemonSet and mirror Pods
EXPECTED = {
    "movable": MOVABLE,
    "unsafe": "safe_to_evict",
    "scratch": "local_storage",
    "claim": "pvc",
    "critical": "system_critical",
    "batch": "kind_not_evicted",
    "agent": LEFT_IN_PLACE,
    "bare": "bare_pod",
    "worker": "evictor_selector",
    "tolerant": "tolerates_drain",
    "budgeted": "pdb",
    "suppressed": "suppressed",
}
# The dense node's load: above the 90% thresholds (never a source itself), with room left
# for the one Pod that may move.
FILLER_CPU = "3700m"


@dataclasses.dataclass(frozen=True)
class Verdict:
    code: str
    text: str

    @property
    def movable(self) -> bool:
        return self.code == MOVABLE


def _deployment(app: str, node: str, labels: dict[str, str] | None = None,
                annotations: dict[str, str] | None = None, cpu: str = "100m",
                **spec: Any) -> dict[str, Any]:
    """One replica pinned to ``node``; ``spec`` is merged into its pod spec."""
    template = pod_template({"app": app, **(labels or {})}, cpu)
    template["spec"].update({"nodeName": node, **spec})
    if annotations:
        template["metadata"]["annotations"] = annotations
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": app},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": app}},
                     "template": template}}


def _create_pods(kube: Kube, ns: str, dense: str, sparse: str) -> None:
    """The dense node's filler, and on the sparse node one Pod per entry of EXPECTED."""
    create = kube.create
    create(path("deployments", ns), _deployment("filler", dense, cpu=FILLER_CPU))
    create(path("deployments", ns), _deployment("movable", sparse))
    create(path("deployments", ns), _deployment(
        "unsafe", sparse, annotations={names.SAFE_TO_EVICT_ANNOTATION: "false"}))
    create(path("deployments", ns), _deployment(
        "scratch", sparse, volumes=[{"name": "scratch", "emptyDir": {}}]))
    create(path("persistentvolumeclaims", ns), {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}})
    create(path("deployments", ns), _deployment(
        "claim", sparse, volumes=[{"name": "data",
                                   "persistentVolumeClaim": {"claimName": "data"}}]))
    # The API server admits the built-in system-critical classes in any namespace (the
    # Priority admission plugin resolves the Pod's priority to 2000000000).
    create(path("deployments", ns), _deployment(
        "critical", sparse, priorityClassName="system-cluster-critical"))
    job = pod_template({"app": "batch"})
    job["spec"].update({"nodeName": sparse, "restartPolicy": "Never"})
    job["metadata"]["annotations"] = {MANUAL_STATUS: "manual"}  # kwok would complete it
    create(path("jobs", ns), {"apiVersion": "batch/v1", "kind": "Job",
                              "metadata": {"name": "batch"},
                              "spec": {"template": job, "backoffLimit": 0}})
    agent = pod_template({"app": "agent"})
    agent["spec"]["nodeSelector"] = {"kubernetes.io/hostname": sparse}
    create(path("daemonsets", ns), {"apiVersion": "apps/v1", "kind": "DaemonSet",
                                    "metadata": {"name": "agent"},
                                    "spec": {"selector": {"matchLabels": {"app": "agent"}},
                                             "template": agent}})
    bare = pod_template({"app": "bare"})
    create(path("pods", ns), {"apiVersion": "v1", "kind": "Pod",
                              "metadata": {"name": "bare", "labels": {"app": "bare"}},
                              "spec": {**bare["spec"], "nodeName": sparse}})
    create(path("deployments", ns), _deployment("worker", sparse, labels={"tier": "worker"}))
    create(path("deployments", ns), _deployment(
        "tolerant", sparse, tolerations=[{"operator": "Exists"}]))
    create(path("deployments", ns), _deployment("budgeted", sparse))
    create(path("poddisruptionbudgets", ns), {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "budgeted"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "budgeted"}}}})
    # Suppressed as the runtime hook leaves a workload it caught looping: the label, and
    # until when in its convergence state (without it, the next pass lifts the suppression).
    until = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    suppressed = _deployment("suppressed", sparse)
    suppressed["metadata"].update({
        "labels": {names.SUPPRESSED_LABEL: "true"},
        "annotations": {names.CONVERGENCE_ANNOTATION:
                        ConvergenceState(suppressed_until=until).render()}})
    create(path("deployments", ns), suppressed)


def _sparse_pods(kube: Kube, ns: str, sparse: str) -> dict[str, dict[str, Any]] | None:
    """Every expected Pod running on the sparse node, by app; None until then."""
    hold_running(kube, ns)
    pods = {p["metadata"]["labels"]["app"]: p for p in kube.items(path("pods", ns))
            if p["spec"].get("nodeName") == sparse and not p["metadata"].get("deletionTimestamp")
            and p["status"].get("phase") == "Running"}
    return pods if set(pods) == set(EXPECTED) else None


def _planner_verdicts(snapshot: Snapshot, policy: str, sparse: str,
                      now: datetime.datetime) -> dict[tuple[str, str], Verdict]:
    """The planner's verdict on each Pod of the sparse node.

    ``controller.plan.decide.plan`` is the pass's own pure planning, from a snapshot read as the
    pass reads it; its drain plans come from ``choose_drains``. A plan answers per node, and
    its reasons do not always name the Pod (a budget's names the budget), so each Pod is
    judged alone: planned on the same snapshot with every other Pod of the sparse node left
    out. The Pod may move when the plan moves it off the node; else the node's first reason
    is the Pod's (the node is in the pool, under the thresholds, and the dense node has room,
    so the Pod is all that can hold it)."""
    settings = PlanSettings(RuntimeSettings())
    # Unbound Pods take room in the plan first ("room already spoken for"); the descheduler
    # knows of no such thing, and other tests leave Pods unbound that no scheduler here will
    # ever bind: only bound Pods are compared.
    others = tuple(p for p in snapshot.pods if p.node_name and p.node_name != sparse)
    mine: list[PodInfo] = [p for p in snapshot.pods if p.node_name == sparse
                           and not p.deleting]
    out: dict[tuple[str, str], Verdict] = {}
    for pod in mine:
        decided = plan(dataclasses.replace(snapshot, pods=(*others, pod)), settings, now)
        (drains,) = [d for d in decided.drains if d.policy == policy]
        reasons = [r for u in (*drains.abandoned, *drains.unremovable) if u.node == sparse
                   for r in u.reasons]
        if pod.key in drains.moves:
            out[pod.key] = Verdict(MOVABLE, f"moved to {drains.moves[pod.key]}")
        elif reasons:
            out[pod.key] = Verdict(reasons[0].code, reasons[0].text)
        else:
            out[pod.key] = Verdict(LEFT_IN_PLACE, "in no plan: the planner neither moves nor "
                                   "counts it (DaemonSet and mirror Pods)")
    return out


def _mark_planned(kube: Kube, ns: str, sparse: str, policy: str) -> None:
    """The sparse node as if its policy drained it, every Pod on it marked for eviction: the
    descheduler's own config alone decides which it evicts."""
    node = kube.get(path("nodes", name=sparse))
    taints = [t for t in node["spec"].get("taints") or [] if t["key"] != names.DRAIN_TAINT]
    kube.patch(path("nodes", name=sparse), {"spec": {"taints": [*taints, {
        "key": names.DRAIN_TAINT, "value": policy, "effect": "PreferNoSchedule"}]}})
    for pod in kube.items(path("pods", ns)):
        if pod["spec"].get("nodeName") == sparse:
            kube.patch(path("pods", ns, pod["metadata"]["name"]),
                       {"metadata": {"labels": {names.DRAINING_LABEL: policy}}})


def _picked(log: str) -> dict[str, str]:
    """The Pods the dry run evicted (namespace/name), each with the plugin that did."""
    return {line.split('pod="', 1)[1].split('"', 1)[0]:
            line.split('strategy="', 1)[1].split('"', 1)[0]
            for line in log.splitlines() if "Evicted pod in dry run mode" in line}


def _eviction_refused(kube: Kube, key: str) -> str | None:
    """What the Eviction API answers the descheduler's call for this Pod (a server-side dry
    run: nothing is evicted); None when it would evict."""
    ns, name = key.split("/", 1)
    try:
        kube.create(path("pods", ns, name, sub="eviction"), {
            "apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": name, "namespace": ns}}, dry_run=True)
    except ApiError as e:
        return f"HTTP {e.status}: {e.message}"
    return None


@pytest.mark.asyncio
async def test_the_descheduler_evicts_exactly_the_pods_the_planner_judges_movable(
        cluster: Cluster, kube: Kube, namespace: str, workloads: Cluster,
        compaction_policies: Policies, in_process_reconciler: Reconciler,
        tmp_path: Path) -> None:
    """One node holds a Pod for each blocker and one Pod that may move. After one pass (the
    controller's Pod labels and the rendered ConfigMap), the planner judges each Pod
    alone (see ``_planner_verdicts``). Then the node is tainted and every Pod on it marked
    as a drain would mark the Pods to evict, and the real descheduler runs ``--dry-run``
    with the ConfigMap's ``policy.yaml``. Its dry run stands in for the Eviction API (it
    deletes from a copy of the cluster and reads no PodDisruptionBudget), so each Pod it
    picks is also put to the real Eviction API as a server-side dry run, the call the
    descheduler makes next; a Pod counts as evicted when both say so. The descheduler
    must evict exactly the Pods the planner may move."""
    pool = f"parity-{uuid.uuid4().hex[:5]}"
    dense, sparse = f"{pool}-dense", f"{pool}-sparse"
    cluster.add_nodes(kube, [dense, sparse], NodeShape(), labels={"compactor.test/pool": pool})
    _create_pods(kube, namespace, dense, sparse)
    wait_for("filler running", lambda: [
        p for p in kube.items(path("pods", namespace), "app=filler")
        if p["status"].get("phase") == "Running"])
    pods = wait_for("a running Pod of each kind on the sparse node",
                    lambda: _sparse_pods(kube, namespace, sparse), timeout=90)
    assert pods["critical"]["spec"].get("priority") == 2_000_000_000
    wait_for("the budget observed", lambda: (
        lambda s: s.get("observedGeneration") and s.get("currentHealthy") == 1)(
            kube.get(path("poddisruptionbudgets", namespace, "budgeted")).get("status", {})))

    policy = compaction_policies.make(namespace, {
        "scope": {"namespaceSelector": {"operator": "In", "values": [namespace]},
                  "workloadTypes": ["Deployment", "StatefulSet", "DaemonSet", "Job"]},
        "descheduler": {
            # Room for every Pod the descheduler would pick, so that a wrong pick cannot
            # hide another behind a limit.
            "maxNoOfPodsToEvictPerNode": 20, "maxNoOfPodsToEvictPerNamespace": 20,
            "maxNoOfPodsToEvictTotal": 20,
            "nodeSelector": {"matchLabels": {"compactor.test/pool": pool}},
            "highNodeUtilization": {"thresholds": {"cpu": 90, "memory": 90, "pods": 90}},
            "defaultEvictor": {"labelSelector": {"matchExpressions": [
                {"key": "tier", "operator": "NotIn", "values": ["worker"]}]}}}})
    summary = await in_process_reconciler.reconcile()
    assert not summary.errors, summary.errors

    now = datetime.datetime.now(datetime.UTC)
    snapshot = await in_process_reconciler.reader.read()
    verdicts = _planner_verdicts(snapshot, policy, sparse, now)
    apps = {f"{namespace}/{p['metadata']['name']}": app for app, p in pods.items()}
    planner = {f"{ns}/{name}": v for (ns, name), v in verdicts.items()}
    assert set(planner) == set(apps), (sorted(planner), sorted(apps))

    _mark_planned(kube, namespace, sparse, policy)
    cm = kube.get(path("configmaps", names.INSTALL_NAMESPACE,
                       names.descheduler_name(policy)))
    doc = yaml.safe_load(cm["data"]["policy.yaml"])
    # Until its snapshot holds both nodes' real load: the dense node's filler, by which
    # nodeFit judges, and the sparse node's Pods (its informers may start before they have
    # listed them all).
    bound = {f"{namespace}/{p['metadata']['name']}" for p in kube.items(path("pods", namespace))
             if p["spec"].get("nodeName") in (dense, sparse)}
    log = descheduler_dry_run(cluster, with_witness(doc), tmp_path,
                              lambda log: bound <= named_pods(log))
    picked = _picked(log)
    assert set(picked) <= set(apps), ("the descheduler picked Pods off the sparse node",
                                      sorted(set(picked) - set(apps)))
    refused = {key: why for key in sorted(picked) if (why := _eviction_refused(kube, key))}
    evicted = set(picked) - set(refused)

    # Every blocker was really made, and judged by the rule meant for it.
    assert {apps[k]: v.code for k, v in planner.items()} == EXPECTED, {
        apps[k]: (v.code, v.text) for k, v in planner.items()}
    disagreements = [
        f"{apps[key]} ({key}): the planner says "
        f"{'movable' if v.movable else f'{v.code} ({v.text})'}; the descheduler "
        + (f"evicts it ({picked[key]})" if key in evicted else
           f"picks it ({picked[key]}) but the Eviction API refuses: {refused[key]}"
           if key in refused else "does not evict it")
        for key, v in sorted(planner.items()) if v.movable != (key in evicted)]
    assert not disagreements, "\n".join(disagreements) + "\n" + log[-3000:]
