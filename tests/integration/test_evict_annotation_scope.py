"""The descheduler's ``descheduler.alpha.kubernetes.io/evict`` annotation passes its
DefaultEvictor's filter before any check, the label selector included (v0.36). A policy's
descheduler must still evict only its own marked Pods: annotated Pods of an ignored workload,
of a namespace no policy covers and of another policy stay, on the node the policy drains and
on an underutilized node of its pool alike. Judged by the real descheduler's dry run."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from compaction import names
from controller.process.reconciler import Reconciler
from localcluster import Cluster, Kube
from localcluster.cluster.control_plane import NodeShape
from localcluster.cluster.kube import path, wait_for
from tests.integration.conftest import Policies
from tests.integration.helpers import (
    descheduler_dry_run,
    evicted_in_dry_run,
    named_pods,
    pod_template,
    running_pods,
    with_witness,
)

EVICT = "descheduler.alpha.kubernetes.io/evict"


def _deployment(name: str, node: str, replicas: int = 1, cpu: str = "100m",
                evict: bool = True, labels: dict[str, str] | None = None,
                annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """``replicas`` Pods pinned to ``node``, annotated for the descheduler when ``evict``."""
    template = pod_template({"app": name}, cpu)
    template["spec"]["nodeName"] = node
    template["metadata"]["annotations"] = {**({EVICT: "true"} if evict else {}),
                                           **(annotations or {})}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": template}}


def _pod(kube: Kube, ns: str, app: str) -> str:
    (pod,) = kube.items(path("pods", ns), f"app={app}")
    return f"{ns}/{pod['metadata']['name']}"


@pytest.mark.asyncio
async def test_annotated_pods_of_no_policy_or_of_another_policy_are_never_evicted(
        cluster: Cluster, kube: Kube, workloads: Cluster, compaction_policies: Policies,
        in_process_reconciler: Reconciler, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:6]
    own, team, free = f"own-{tag}", f"team-{tag}", f"free-{tag}"
    pool = f"evict-{tag}"
    dense, drained, sparse = f"{pool}-dense", f"{pool}-drained", f"{pool}-sparse"
    cluster.add_nodes(kube, [dense, drained, sparse], NodeShape(),
                      labels={"compactor.test/pool": pool})
    for ns in (own, team, free):
        kube.ensure_namespace(ns, default_service_account=True)
    try:
        # The dense node at 75% CPU, above the thresholds: the destination of anything the
        # two underutilized nodes would shed.
        kube.create(path("deployments", own),
                    _deployment("filler", dense, replicas=3, cpu="1", evict=False))
        kube.create(path("deployments", own), _deployment("control", drained, evict=False))
        for node, at in ((drained, "d"), (sparse, "s")):
            kube.create(path("deployments", own), _deployment(
                f"ignored-{at}", node, labels={names.IGNORE_LABEL: "true"},
                annotations={names.SAFE_TO_EVICT_ANNOTATION: "false"}))
            kube.create(path("deployments", free), _deployment(f"free-{at}", node))
            kube.create(path("deployments", team), _deployment(f"team-{at}", node))
        apps = [(own, "filler", 3), (own, "control", 1)] + [
            (ns, f"{kind}-{at}", 1) for ns, kind in ((own, "ignored"), (free, "free"),
                                                     (team, "team")) for at in "ds"]
        for ns, app, n in apps:
            def up(s: str = ns, a: str = app, c: int = n) -> list[dict[str, Any]] | None:
                return running_pods(kube, s, f"app={a}", c)
            wait_for(f"{ns}/{app} running", up)

        spec = {"descheduler": {
            # Room for every Pod a descheduler could pick: a limit must hide no wrong pick.
            "maxNoOfPodsToEvictPerNode": 20, "maxNoOfPodsToEvictPerNamespace": 20,
            "maxNoOfPodsToEvictTotal": 20,
            "nodeSelector": {"matchLabels": {"compactor.test/pool": pool}},
            "highNodeUtilization": {"thresholds": {"cpu": 50, "memory": 100, "pods": 100}}}}
        mine = compaction_policies.make(own, spec)
        theirs = compaction_policies.make(team, spec)
        summary = await in_process_reconciler.reconcile()
        assert not summary.errors, summary.errors

        control = _pod(kube, own, "control")
        annotated = {_pod(kube, ns, f"{kind}-{at}") for ns, kind in (
            (own, "ignored"), (free, "free"), (team, "team")) for at in "ds"}
        policy_of = {f"{p['metadata']['namespace']}/{p['metadata']['name']}":
                     (p["metadata"].get("labels") or {}).get(names.POLICY_LABEL)
                     for ns in (own, team, free) for p in kube.items(path("pods", ns))}
        assert {k: v for k, v in policy_of.items() if k in annotated | {control}} == {
            control: mine, **{k: theirs if k.startswith(f"{team}/") else None
                              for k in annotated}}

        # The Pods of no policy hold both sparse nodes, so the plan drains neither: mark one
        # as a drain shared by both teams would, each team's Pod for its own policy.
        for node in (drained, sparse):
            taints = kube.get(path("nodes", name=node))["spec"].get("taints") or []
            assert not any(t["key"] == names.DRAIN_TAINT for t in taints), (node, taints)
        kube.patch(path("nodes", name=drained), {"spec": {"taints": [{
            "key": names.DRAIN_TAINT, "value": mine, "effect": "PreferNoSchedule"}]}})
        for key, policy in ((control, mine), (_pod(kube, team, "team-d"), theirs)):
            ns, name = key.split("/")
            kube.patch(path("pods", ns, name),
                       {"metadata": {"labels": {names.DRAINING_LABEL: policy}}})

        for policy, expected in ((mine, {control}), (theirs, {_pod(kube, team, "team-d")})):
            cm = kube.get(path("configmaps", names.INSTALL_NAMESPACE,
                               names.descheduler_name(policy)))
            doc = yaml.safe_load(cm["data"]["policy.yaml"])
            (tmp_path / policy).mkdir()
            # Until the run's snapshot held every Pod of the test (the witness named them).
            log = descheduler_dry_run(cluster, with_witness(doc), tmp_path / policy,
                                      lambda text: annotated | {control} <= named_pods(text))
            evicted = evicted_in_dry_run(log)
            assert set(evicted) == expected, (policy, sorted(evicted), log[-3000:])
            assert set(evicted.values()) == {
                ("RemovePodsViolatingNodeTaints", f"compactor-{policy}")}, evicted
    finally:
        kube.patch(path("nodes", name=drained), {"spec": {"taints": None}})
        for ns in (own, team, free):
            kube.delete(path("namespaces", name=ns))
