"""``kubectl compactor plan`` against the real API server: the installed console script, run
with a ServiceAccount that has exactly the ``compactor-preview`` ClusterRole (get and list
only, so it can write nothing), on a small spread cluster where Compactor was never
installed (its CRDs need not exist), with a policy from ``-f``; Pods the simulation does
not judge are reported as such, and their nodes never freed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from compaction import names
from controller.process.reconciler import Reconciler
from localcluster import Cluster, Kube
from localcluster.cluster.control_plane import ROOT
from localcluster.cluster.kube import path, wait_for
from localcluster.cluster.process import free_port
from localcluster.cluster.stack import service_account_token, token_kubeconfig
from tests.integration.conftest import Policies

PLUGIN = str(Path(sys.executable).parent / "kubectl-compactor")
ROLE_FILE = ROOT / "deploy" / "rbac" / "preview.yaml"
PAUSE = "registry.k8s.io/pause:3.10"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PLUGIN, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "KUBECONFIG": "/nonexistent"})


def _role() -> dict[str, Any]:
    (role,) = [d for d in yaml.safe_load_all(ROLE_FILE.read_text()) if d]
    assert role["kind"] == "ClusterRole"
    return dict(role)


def _bind(kube: Kube, namespace: str, role: dict[str, Any], name: str) -> None:
    """``role`` under ``name``, bound to a ServiceAccount ``name`` of ``namespace``."""
    kube.apply(path("serviceaccounts", namespace, name), {
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace}})
    kube.apply(path("clusterroles", name=name), {**role, "metadata": {"name": name}})
    kube.apply(path("clusterrolebindings", name=name), {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]})


@dataclass
class Spread:
    nodes: list[str]
    policy_file: Path
    kubeconfig: Path  # the ServiceAccount with exactly compactor-preview
    short: Path  # one with the same role less list on poddisruptionbudgets
    workdir: Path


@pytest.fixture
def spread(cluster: Cluster, kube: Kube, namespace: str, workloads: Cluster,
           tmp_path: Path) -> Iterator[Spread]:
    """Three kwok nodes of their own (labelled and tainted for this test), a Deployment of
    three small replicas the default scheduler spread one per node, and a policy for them."""
    tag = namespace
    nodes = [f"preview-{tag}-{i}" for i in range(3)]
    workloads.add_nodes(kube, nodes, labels={"preview-pool": tag})
    for name in nodes:
        kube.patch(path("nodes", name=name), {"spec": {"taints": [
            {"key": "preview", "value": tag, "effect": "NoSchedule"}]}})
    labels = {"app": "web"}
    kube.create(path("deployments", namespace), {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels}, "spec": {
                "nodeSelector": {"preview-pool": tag},
                "tolerations": [{"key": "preview", "operator": "Equal", "value": tag,
                                 "effect": "NoSchedule"}],
                "containers": [{"name": "app", "image": PAUSE, "resources": {
                    "requests": {"cpu": "200m", "memory": "256Mi"}}}]}}}})

    def spread_out() -> set[str] | None:
        pods = kube.items(path("pods", namespace), "app=web")
        on = {p["spec"].get("nodeName") for p in pods if p["status"].get("phase") == "Running"}
        return on if len(pods) == 3 and on == set(nodes) else None
    wait_for("three replicas running, one per node", spread_out)
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(yaml.safe_dump_all([{
        "apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
        "metadata": {"name": "spread"},
        "spec": {"scope": {"namespaceSelector": {"operator": "In", "values": [namespace]}},
                 "descheduler": {"nodeSelector": {"matchLabels": {"preview-pool": tag}}}}}]))
    full, short = f"preview-{uuid.uuid4().hex[:6]}", f"preview-short-{uuid.uuid4().hex[:6]}"
    _bind(kube, namespace, _role(), full)
    less = _role()
    less["rules"] = [r for r in less["rules"] if r["apiGroups"] != ["policy"]]
    _bind(kube, namespace, less, short)
    try:
        yield Spread(nodes, policy_file, token_kubeconfig(
            cluster, service_account_token(kube, namespace, full), tmp_path / "full.yaml"),
            token_kubeconfig(cluster, service_account_token(kube, namespace, short),
                             tmp_path / "short.yaml"), tmp_path)
    finally:
        for name in (full, short):
            kube.delete(path("clusterrolebindings", name=name))
            kube.delete(path("clusterroles", name=name))
        kube.delete(path("deployments", namespace, "web"))
        for name in nodes:
            kube.delete(path("nodes", name=name))


def test_the_preview_role_alone_plans_a_spread_cluster(spread: Spread, cluster: Cluster
                                                       ) -> None:
    done = _run("plan", "-f", str(spread.policy_file), "--kubeconfig", str(spread.kubeconfig),
                "-o", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["policies"] == ["spread"]
    assert set(spread.nodes) <= set(report["nodesInUse"])
    freed = [f["node"] for f in report["freeable"]]
    assert len(freed) == 2 and set(freed) < set(spread.nodes), report
    (kept,) = set(spread.nodes) - set(freed)
    # It takes the Pods of the node freed last; the Pod it took from the node freed first has
    # replaced an eviction too recently to move again (evictReplacementsAfter).
    assert [r["code"] for r in report["stays"][kept]] == ["recently_replaced", "destination"]
    assert [(f["podsToMove"], f["evictions"]) for f in report["freeable"]] == [(1, 1), (1, 1)]
    # The three replicas fit on one node: the plan reaches the packing's bound for them.
    assert report["podsToMove"] == 2
    assert report["lowerBound"] <= report["ffdPacking"]
    assert report["lowerBound"] <= report["nodesAfter"]

    # As kubectl runs it: a plugin found on the PATH, its arguments passed on.
    text = subprocess.run(
        [str(cluster.bin / "kubectl"), "compactor", "plan", "-f", str(spread.policy_file),
         "--kubeconfig", str(spread.kubeconfig), "--price-per-node", "0.1"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PATH": f"{Path(PLUGIN).parent}{os.pathsep}{os.environ['PATH']}"})
    assert text.returncode == 0, text.stderr
    assert "Could free 2 nodes, in the order they would be drained:" in text.stdout
    assert "Savings: $146.00/month (730 h) for 2 priced nodes" in text.stdout
    print(text.stdout)  # the sample of docs/preview.md


def test_one_permission_less_fails_naming_it(spread: Spread) -> None:
    done = _run("plan", "-f", str(spread.policy_file), "--kubeconfig", str(spread.short))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "forbidden (403): cannot list poddisruptionbudgets.policy" in line, line
    assert done.stdout == ""


def test_a_bad_policy_lists_every_problem_with_its_path(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump_all([
        {"apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
         "metadata": {"name": "bad"}, "spec": {"weight": "heavy", "descheduler": {
             "maxNoOfPodsToEvictPerNode": -1}}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}]))
    done = _run("plan", "-f", str(bad), "--kubeconfig", "/nonexistent")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    paths = [line.split(": ")[3] for line in lines]
    assert paths == ["spec.weight", "spec.descheduler.maxNoOfPodsToEvictPerNode",
                     "apiVersion", "kind"], lines
    assert all(line.startswith(f"error: {bad}#") for line in lines)


def test_an_unreachable_cluster_a_silent_one_and_refused_credentials_say_so_in_one_line(
        cluster: Cluster, tmp_path: Path, kube: Kube) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(yaml.safe_dump({
        "apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
        "metadata": {"name": "p"}, "spec": {}}))
    port = free_port()
    nowhere = token_kubeconfig(cluster, "x", tmp_path / "nowhere.yaml",
                               server=f"https://127.0.0.1:{port}")
    done = _run("plan", "-f", str(policy), "--kubeconfig", str(nowhere))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: cannot reach the API server at https://127.0.0.1:{port}")

    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        port = silent.getsockname()[1]
        mute = token_kubeconfig(cluster, "x", tmp_path / "mute.yaml",
                                server=f"https://127.0.0.1:{port}")
        done = _run("plan", "-f", str(policy), "--kubeconfig", str(mute),
                    "--request-timeout", "1")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "no answer within 1 s (--request-timeout SECONDS" in line, line

    refused = token_kubeconfig(cluster, "not-a-token", tmp_path / "refused.yaml")
    done = _run("plan", "-f", str(policy), "--kubeconfig", str(refused))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "refused the credentials (401 Unauthorized)" in line, line


def test_without_files_the_clusters_own_policies_are_judged(
        spread: Spread, compaction_policies: Policies, namespace: str) -> None:
    name = compaction_policies.make(namespace, {"descheduler": {
        "nodeSelector": {"matchLabels": {"preview-pool": namespace}}}})
    done = _run("plan", "--kubeconfig", str(spread.kubeconfig), "-o", "yaml")
    assert done.returncode == 0, done.stderr
    report = yaml.safe_load(done.stdout)
    assert name in report["policies"]
    assert len([f for f in report["freeable"] if f["node"] in spread.nodes]) == 2


def _pinned(name: str, namespace: str, node: str, tag: str, **spec: Any) -> dict[str, Any]:
    """A Deployment of one small replica on ``node``, with ``spec`` added to its Pod's."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels}, "spec": {
                "nodeSelector": {"kubernetes.io/hostname": node},
                "tolerations": [{"key": "preview", "operator": "Equal", "value": tag,
                                 "effect": "NoSchedule"}],
                "containers": [{"name": "app", "image": PAUSE, "resources": {
                    "requests": {"cpu": "100m", "memory": "64Mi"}}}],
                **spec}}}}


def test_pods_the_simulation_does_not_judge_are_reported_and_hold_their_nodes(
        spread: Spread, kube: Kube, namespace: str) -> None:
    """One Pod with required pod affinity (to the web replica on its node), one with a
    DoNotSchedule topology spread: both are named with their reason, in text and JSON, and
    the preview guesses no move for their nodes; the third node is still freed."""
    paired, zoned, free = spread.nodes
    deployments = {
        "paired": _pinned("paired", namespace, paired, namespace, affinity={"podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": "web"}},
                "topologyKey": "kubernetes.io/hostname"}]}}),
        "zoned": _pinned("zoned", namespace, zoned, namespace, topologySpreadConstraints=[{
            "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "zoned"}}}]),
    }
    for body in deployments.values():
        kube.create(path("deployments", namespace), body)

    def placed() -> dict[str, str] | None:
        on = {}
        for name in deployments:
            pods = [p for p in kube.items(path("pods", namespace), f"app={name}")
                    if p["status"].get("phase") == "Running"]
            if len(pods) != 1:
                return None
            on[name] = f"{namespace}/{pods[0]['metadata']['name']}"
        return on
    pods = wait_for("the two constrained Pods running", placed)
    try:
        done = _run("plan", "-f", str(spread.policy_file), "--kubeconfig",
                    str(spread.kubeconfig), "-o", "json")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        ours = [u for u in report["unsimulated"] if u["pod"].startswith(f"{namespace}/")]
        assert sorted(ours, key=lambda u: u["node"]) == sorted([
            {"pod": pods["paired"], "node": paired, "reason": "required pod affinity"},
            {"pod": pods["zoned"], "node": zoned,
             "reason": "topology spread on kubernetes.io/hostname (DoNotSchedule)"},
        ], key=lambda u: u["node"]), report["unsimulated"]
        freed = [f["node"] for f in report["freeable"]]
        assert paired not in freed and zoned not in freed, report["freeable"]
        for node in (paired, zoned):
            assert "not_simulated" in [r["code"] for r in report["stays"][node]], \
                report["stays"][node]
        assert freed == [free], report  # its web replica fits beside the others
        held = {h["code"]: h["nodes"] for h in report["heldBy"]}
        assert {paired, zoned} <= set(held["not_simulated"])

        text = _run("plan", "-f", str(spread.policy_file), "--kubeconfig",
                    str(spread.kubeconfig))
        assert text.returncode == 0, text.stderr
        assert "held by: pod the simulation does not judge (not_simulated)" in text.stdout
        assert f"  {pods['paired']} on {paired}: required pod affinity" in text.stdout
        assert (f"  {pods['zoned']} on {zoned}: topology spread on kubernetes.io/hostname "
                "(DoNotSchedule)") in text.stdout
        assert "Not simulated: " in text.stdout
    finally:
        for name in deployments:
            kube.delete(path("deployments", namespace, name))


def _app(name: str, tag: str, replicas: int, cpu: str, **meta: Any) -> dict[str, Any]:
    """A Deployment of ``replicas`` on the test's nodes (not pinned to any one), its Pods
    with ``meta`` (annotations) added."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels, **meta}, "spec": {
                "nodeSelector": {"preview-pool": tag},
                "tolerations": [{"key": "preview", "operator": "Equal", "value": tag,
                                 "effect": "NoSchedule"}],
                "containers": [{"name": "app", "image": PAUSE, "resources": {
                    "requests": {"cpu": cpu, "memory": "256Mi"}}}]}}}}


@pytest.mark.asyncio
async def test_what_would_free_more_ranks_a_closed_budget_first_and_relaxed_it_frees_that(
        cluster: Cluster, kube: Kube, namespace: str, workloads: Cluster,
        compaction_policies: Policies, in_process_reconciler: Reconciler, tmp_path: Path
        ) -> None:
    """As the demo's cluster holds them: a web replica on each of four nodes, a db of two
    under a PodDisruptionBudget with maxUnavailable 0, and a cache annotated safe-to-evict
    "false". The preview's counterfactual ranks the budget first, with what relaxing it
    frees more; relaxed, the controller's own pass plans that many nodes more."""
    tag = namespace
    nodes = [f"what-if-{tag}-{i}" for i in range(4)]
    workloads.add_nodes(kube, nodes, labels={"preview-pool": tag})
    try:
        for name in nodes:
            kube.patch(path("nodes", name=name), {"spec": {"taints": [
                {"key": "preview", "value": tag, "effect": "NoSchedule"}]}})
        kube.create(path("deployments", namespace), _app("web", tag, 4, "200m"))

        def on(app: str, count: int) -> list[str] | None:
            pods = kube.items(path("pods", namespace), f"app={app}")
            placed = [p["spec"].get("nodeName") for p in pods
                      if p["status"].get("phase") == "Running"]
            return placed if len(pods) == count == len(placed) else None
        assert sorted(wait_for("web on every node", lambda: on("web", 4))) == sorted(nodes)
        kube.create(path("deployments", namespace), _app("db", tag, 2, "200m"))
        db = wait_for("db running", lambda: on("db", 2))
        kube.create(path("poddisruptionbudgets", namespace), {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "db"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "db"}}}})
        # The cache asks for more than the others: its node is the fullest, where the
        # planner puts what it moves first.
        kube.create(path("deployments", namespace), _app("cache", tag, 1, "1", annotations={
            names.SAFE_TO_EVICT_ANNOTATION: "false"}))
        (cache,) = wait_for("cache running", lambda: on("cache", 1))
        assert len(set(db)) == 2 and cache not in db, (db, cache)  # the scheduler spread them
        wait_for("the budget judged", lambda: kube.get(path(
            "poddisruptionbudgets", namespace, "db"))["status"].get("currentHealthy") == 2)

        spec = {"descheduler": {"nodeSelector": {"matchLabels": {"preview-pool": tag}}}}
        policy_file = tmp_path / "policy.yaml"
        policy_file.write_text(yaml.safe_dump({
            "apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
            "metadata": {"name": "what-if"}, "spec": {
                "scope": {"namespaceSelector": {"operator": "In", "values": [namespace]}},
                **spec}}))
        done = _run("plan", "-f", str(policy_file), "--kubeconfig", str(cluster.kubeconfig),
                    "-o", "json", "--price-per-node", "0.1")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        freed = [f["node"] for f in report["freeable"] if f["node"] in nodes]
        ranked = report["counterfactual"]
        first = ranked[0]
        assert (first["kind"], first["target"], first["planned"]) == (
            "PodDisruptionBudget", f"{namespace}/db", True), ranked
        assert first["moreNodes"] >= 1 and set(first["nodes"]) <= set(nodes), first
        assert first["monthlySavings"] == pytest.approx(73.0 * first["moreNodes"])
        annotation = next(r for r in ranked if r["kind"] == "annotation")
        assert annotation["target"] == f"Deployment {namespace}/cache", annotation
        assert annotation["annotation"] == names.SAFE_TO_EVICT_ANNOTATION
        assert annotation["moreNodes"] is None or annotation["moreNodes"] < first["moreNodes"]
        text = _run("plan", "-f", str(policy_file), "--kubeconfig", str(cluster.kubeconfig))
        assert text.returncode == 0, text.stderr
        assert (f"  1. PodDisruptionBudget {namespace}/db: frees {first['moreNodes']} more "
                "node") in text.stdout, text.stdout
        print(text.stdout)  # the sample of docs/preview.md

        # Relaxed, the policy applied: the controller's pass frees that many more.
        kube.patch(path("poddisruptionbudgets", namespace, "db"),
                   {"spec": {"maxUnavailable": 1}})
        wait_for("the budget allows 1", lambda: kube.get(path(
            "poddisruptionbudgets", namespace, "db"))["status"].get("disruptionsAllowed") == 1)
        name = compaction_policies.make(namespace, spec)
        summary = await in_process_reconciler.reconcile()
        assert not summary.errors, summary.errors
        plan = kube.get(compaction_policies.path(name))["status"]["plan"]
        assert plan["freeable"] == len(freed) + first["moreNodes"], (plan, freed, first)
        assert set(first["nodes"]) <= set(plan["freeableNodes"]), (plan, first)
    finally:
        for app in ("web", "db", "cache"):
            kube.delete(path("deployments", namespace, app))
        for name in nodes:
            kube.delete(path("nodes", name=name))
