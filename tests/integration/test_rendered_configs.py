"""The rendered configs are accepted by the real binaries: the descheduler plans evictions from
our DeschedulerPolicy, and kube-scheduler with our config binds compactor-scheduler Pods."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from compaction.validation import parse_policy
from controller.components.descheduler import render_descheduler_policy
from controller.components.scheduler import render_scheduler_config
from localcluster import Cluster, Kube
from localcluster.cluster.control_plane import NodeShape
from localcluster.cluster.kube import path, wait_for
from localcluster.cluster.process import free_port
from localcluster.cluster.stack import local_scheduler_config
from tests.integration.helpers import (
    descheduler_dry_run,
    evicted_in_dry_run,
    named_pods,
    own_pool,
    pod_template,
    run_pinned,
    running_pods,
    with_witness,
)
from tests.reference import reference_policies


@pytest.fixture
def pool(cluster: Cluster, kube: Kube, workloads: Cluster) -> tuple[str, list[str]]:
    """Two fresh nodes in a pool of their own, so other tests' Pods don't count."""
    return own_pool(cluster, kube, ("dense", "sparse"))


def test_real_descheduler_dry_run_evicts_only_eligible_pods_from_the_drained_node(
        cluster: Cluster, kube: Kube, namespace: str, pool: tuple[str, list[str]],
        tmp_path: Path) -> None:
    pool_name, (_, sparse) = pool
    policy = parse_policy({"metadata": {"name": "pack", "uid": "u1"}, "spec": {"descheduler": {
        "nodeSelector": {"matchExpressions": [{"key": "compactor.test/pool", "operator": "In",
                                               "values": ["pool-*"]}]}}}})
    # As the controller labels the Pods of a node its plan drains.
    managed = {"compactor.dev/policy": "pack", "compactor.dev/workload-kind": "Deployment",
               "compactor.dev/draining": "pack"}
    run_pinned(kube, namespace, [
        ("movable", sparse, 1, "200m", managed),
        ("guarded", sparse, 1, "200m", {**managed, "compactor.dev/protected": "true"}),
        ("foreign", sparse, 1, "200m", {"compactor.dev/policy": "other"})])
    kube.patch(path("nodes", name=sparse), {"spec": {"taints": [{
        "key": "compactor.dev/drain", "value": "pack", "effect": "PreferNoSchedule"}]}})
    try:
        node_labels = {"compactor.test/pool": [pool_name, "unrelated"]}
        doc = render_descheduler_policy(policy, node_labels)
        assert doc["nodeSelector"] == f"compactor.test/pool in ({pool_name})"
        apps = {f"{namespace}/{p['metadata']['name']}": p["metadata"]["labels"]["app"]
                for p in kube.items(path("pods", namespace))}
        # Until its snapshot held every Pod of the drained node.
        log = descheduler_dry_run(cluster, with_witness(doc), tmp_path,
                                  lambda text: set(apps) <= named_pods(text))
        # The protected Pod and the other policy's Pod are outside our selector.
        assert [apps[k] for k in evicted_in_dry_run(log)] == ["movable"], log[-3000:]
    finally:
        kube.patch(path("nodes", name=sparse), {"spec": {"taints": None}})


POLICYCHECK_CASES = {
    **{name: (body, {}) for name, body in reference_policies().items()},
    "pool-matched": ({"metadata": {"name": "pool"}, "spec": {"descheduler": {"nodeSelector": {
        "matchExpressions": [{"key": "pool", "operator": "In", "values": ["batch-*"]}]}}}},
        {"pool": ["batch-a"]}),
    "pool-matching-no-node": ({"metadata": {"name": "pool"}, "spec": {"descheduler": {
        "nodeSelector": {"matchExpressions": [
            {"key": "pool", "operator": "In", "values": ["batch-*"]}]}}}}, {"pool": ["web"]}),
    "namespaced": ({"kind": "CompactionPolicy", "metadata": {"name": "team", "namespace": "shop"},
                    "spec": {"weight": 5}}, {}),
    "every-evictor-flag": ({"metadata": {"name": "flags"}, "spec": {"descheduler": {
        "defaultEvictor": {"nodeFit": False, "evictSystemCriticalPods": True,
                           "evictLocalStoragePods": True, "ignorePvcPods": False,
                           "evictDaemonSetPods": True,
                           "labelSelector": {"matchLabels": {"tier": "web"}}}}}}, {}),
}


def _zero(value: Any) -> bool:
    return value in (False, 0, "", None, [], {})


def _missing(ours: Any, loaded: Any, at: str = "") -> list[str]:
    """Paths of what we rendered that the loaded policy does not hold (Go's omitempty drops
    zero values, which therefore count as held)."""
    if isinstance(ours, dict):
        if not isinstance(loaded, dict):
            return [at or "."]
        return [p for k, v in ours.items()
                for p in ([] if _zero(v) and k not in loaded else
                          _missing(v, loaded.get(k), f"{at}.{k}"))]
    if isinstance(ours, list):
        if not isinstance(loaded, list) or len(loaded) != len(ours):
            return [at]
        return [p for i, (a, b) in enumerate(zip(ours, loaded, strict=True))
                for p in _missing(a, b, f"{at}[{i}]")]
    return [] if ours == loaded else [f"{at}: {ours!r} != {loaded!r}"]


@pytest.mark.parametrize("case", list(POLICYCHECK_CASES))
def test_every_rendered_key_is_one_the_descheduler_v036_types_load(
        cluster: Cluster, tmp_path: Path, case: str) -> None:
    body, node_labels = POLICYCHECK_CASES[case]
    doc = render_descheduler_policy(parse_policy(body), node_labels)
    file = tmp_path / "policy.yaml"
    file.write_text(yaml.safe_dump(doc))
    out = subprocess.run([str(cluster.bin / "descheduler-policycheck"), str(file)],
                         capture_output=True, text=True, timeout=60, check=False)
    # Strict decoding with upstream's Go types: a key they lack fails here, where the
    # descheduler itself would silently drop it.
    assert out.returncode == 0, out.stderr
    loaded = json.loads(out.stdout)
    for ours, theirs in zip(doc["profiles"][0]["pluginConfig"],
                            loaded["profiles"][0]["pluginConfig"], strict=True):
        assert ours["name"] == theirs["name"]
    assert _missing(doc, {**loaded, "apiVersion": doc["apiVersion"], "kind": doc["kind"]}) == []


def test_a_pool_pattern_matching_no_node_still_loads_in_the_real_descheduler(
        cluster: Cluster, kube: Kube, tmp_path: Path) -> None:
    body, node_labels = POLICYCHECK_CASES["pool-matching-no-node"]
    file = tmp_path / "policy.yaml"
    file.write_text(yaml.safe_dump(render_descheduler_policy(parse_policy(body), node_labels)))
    out = subprocess.run(
        [str(cluster.bin / "descheduler"), f"--kubeconfig={cluster.kubeconfig}",
         f"--policy-config-file={file}", "--dry-run", "--v=3", "--bind-address=127.0.0.1",
         f"--secure-port={free_port()}", f"--cert-dir={tmp_path / 'certs'}"],
        capture_output=True, text=True, timeout=120, check=False)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-3000:]
    assert "unable to parse" not in log and "Evicted pod" not in log


def test_real_descheduler_evicts_a_planned_drain_and_nothing_else(
        cluster: Cluster, kube: Kube, namespace: str, pool: tuple[str, list[str]],
        tmp_path: Path) -> None:
    """RemovePodsViolatingNodeTaints takes the Pods the plan marked on the node it tainted;
    an unmarked Pod of the policy there, and every Pod elsewhere, stay."""
    pool_name, (dense, sparse) = pool
    policy = parse_policy({"metadata": {"name": "plan", "uid": "u2"}, "spec": {"descheduler": {
        "maxNoOfPodsToEvictPerNode": 5, "maxNoOfPodsToEvictPerNamespace": 5,
        "maxNoOfPodsToEvictTotal": 5,
        "nodeSelector": {"matchLabels": {"compactor.test/pool": pool_name}}}}})
    managed = {"compactor.dev/policy": "plan", "compactor.dev/workload-kind": "Deployment"}
    draining = {**managed, "compactor.dev/draining": "plan"}
    run_pinned(kube, namespace, [
        ("stay", dense, 1, "200m", draining), ("planned", sparse, 2, "200m", draining),
        ("unmarked", sparse, 1, "200m", managed)])
    kube.patch(path("nodes", name=sparse), {"spec": {"taints": [{
        "key": "compactor.dev/drain", "value": "plan", "effect": "PreferNoSchedule"}]}})
    try:
        doc = render_descheduler_policy(policy, {"compactor.test/pool": [pool_name]})
        pods = {f"{namespace}/{p['metadata']['name']}": p["metadata"]["labels"]["app"]
                for p in kube.items(path("pods", namespace))}
        # Until its snapshot held every Pod of both nodes (a run whose snapshot held one
        # planned Pod evicts one: a snapshot short of the test's Pods, not a verdict).
        log = descheduler_dry_run(cluster, with_witness(doc), tmp_path,
                                  lambda text: set(pods) <= named_pods(text))
        evicted = evicted_in_dry_run(log)
        assert sorted(pods[k] for k in evicted) == ["planned", "planned"], log[-3000:]
        assert {strategy for strategy, _ in evicted.values()} == {
            "RemovePodsViolatingNodeTaints"}
    finally:
        kube.patch(path("nodes", name=sparse), {"spec": {"taints": None}})


def test_real_kube_scheduler_with_rendered_config_binds_to_the_fullest_node(
        cluster: Cluster, kube: Kube, namespace: str, pool: tuple[str, list[str]],
        tmp_path: Path) -> None:
    pool_name, (dense, sparse) = pool
    kube.ensure_namespace("compactor-system")
    config = tmp_path / "scheduler.yaml"
    config.write_text(yaml.safe_dump(local_scheduler_config(render_scheduler_config(),
                                                           cluster.kubeconfig)))
    proc = cluster.start_scheduler(name="compactor-scheduler", config=config)
    try:
        run_pinned(kube, namespace, [("base", dense, 2, "1", {})])
        spec = pod_template({"app": "packed"}, "500m")["spec"]
        spec["schedulerName"] = "compactor-scheduler"
        spec["nodeSelector"] = {"compactor.test/pool": pool_name}
        for i in range(3):
            kube.create(path("pods", namespace), {"metadata": {"name": f"packed-{i}",
                                                               "labels": {"app": "packed"}},
                                                  "spec": spec})
        try:
            pods = wait_for("packed pods bound", lambda: running_pods(kube, namespace,
                                                                      "app=packed", 3))
        except TimeoutError as e:
            states = [(p["metadata"]["name"], p["spec"].get("nodeName"), p["status"])
                      for p in kube.items(path("pods", namespace), "app=packed")]
            raise AssertionError(f"{e}: {states}") from e
        # MostAllocated: every new Pod goes to the node that is already busier.
        assert {p["spec"]["nodeName"] for p in pods} == {dense}
        # Unless the planner drains it: its PreferNoSchedule taint outweighs MostAllocated.
        kube.patch(path("nodes", name=dense), {"spec": {"taints": [{
            "key": "compactor.dev/drain", "value": "p", "effect": "PreferNoSchedule"}]}})
        for i in range(3, 5):
            kube.create(path("pods", namespace), {"metadata": {"name": f"packed-{i}",
                                                               "labels": {"app": "avoid"}},
                                                  "spec": spec})
        avoided = wait_for("pods bound beside the draining node", lambda: running_pods(
            kube, namespace, "app=avoid", 2))
        assert {p["spec"]["nodeName"] for p in avoided} == {sparse}
        events = kube.items(path("events", namespace))
        assert any(e.get("reason") == "Scheduled" and (
            e.get("reportingComponent") == "compactor-scheduler"
            or e.get("source", {}).get("component") == "compactor-scheduler") for e in events)
        lease = kube.get(path("leases", "compactor-system", "compactor-scheduler"))
        assert lease["spec"]["holderIdentity"]
    finally:
        kube.patch(path("nodes", name=dense), {"spec": {"taints": None}})
        proc.stop()
        cluster.processes.remove(proc)


def test_node_fit_judges_only_the_nodes_of_the_policys_pool(
        cluster: Cluster, kube: Kube, namespace: str, pool: tuple[str, list[str]],
        tmp_path: Path) -> None:
    """The pool reaches DefaultEvictor's own ``nodeSelector``, where nodeFit reads it: a Pod
    that fits on no other node of the pool is not evicted, though a node outside it has room.
    The same policy without that selector evicts it, which is what the selector prevents."""
    pool_name, (dense, sparse) = pool
    outside = f"{pool_name}-outside"
    cluster.add_nodes(kube, [outside], NodeShape(cpu="8", memory="32Gi", pods="110"),
                      labels={"compactor.test/pool": f"{pool_name}-other"})
    policy = parse_policy({"metadata": {"name": "fit", "uid": "u3"}, "spec": {"descheduler": {
        "maxNoOfPodsToEvictPerNode": 5, "maxNoOfPodsToEvictPerNamespace": 5,
        "maxNoOfPodsToEvictTotal": 5,
        "nodeSelector": {"matchLabels": {"compactor.test/pool": pool_name}}}}})
    draining = {"compactor.dev/policy": "fit", "compactor.dev/workload-kind": "Deployment",
                "compactor.dev/draining": "fit"}
    # 3 of the dense node's 4 CPUs are taken: the 1.5-CPU Pod fits nowhere else in the pool.
    run_pinned(kube, namespace, [("heavy", dense, 3, "1", {}),
                                 ("big", sparse, 1, "1500m", draining)])
    kube.patch(path("nodes", name=sparse), {"spec": {"taints": [{
        "key": "compactor.dev/drain", "value": "fit", "effect": "PreferNoSchedule"}]}})
    try:
        doc = render_descheduler_policy(policy, {"compactor.test/pool": [pool_name]})
        (profile,) = doc["profiles"]
        (evictor,) = [p for p in profile["pluginConfig"] if p["name"] == "DefaultEvictor"]
        assert evictor["args"]["nodeSelector"] == f"compactor.test/pool in ({pool_name})"
        assert evictor["args"]["nodeFit"] is True
        refused = "pod does not fit on any other node"
        (tmp_path / "pool").mkdir()
        (tmp_path / "cluster").mkdir()
        try:
            log = descheduler_dry_run(cluster, doc, tmp_path / "pool",
                                      lambda text: refused in text and f"{namespace}/big-" in text)
        except AssertionError as e:
            # What the descheduler should have seen, as the API server has it now.
            big = [(p["metadata"].get("labels"), p["spec"].get("nodeName"), p["status"].get(
                "phase")) for p in kube.items(path("pods", namespace))
                   if p["metadata"]["name"].startswith("big-")]
            taints = kube.get(path("nodes", name=sparse))["spec"].get("taints")
            raise AssertionError(f"{e}\nbig Pods (labels, node, phase): {big}\n"
                                 f"the sparse node's taints: {taints}") from e
        assert "Evicted pod in dry run mode" not in log, log[-3000:]

        del evictor["args"]["nodeSelector"]
        log = descheduler_dry_run(cluster, doc, tmp_path / "cluster",
                                  lambda text: "Evicted pod in dry run mode" in text)
        planned = [line for line in log.splitlines() if "Evicted pod in dry run mode" in line]
        assert len(planned) == 1 and f'"{namespace}/big-' in planned[0], log[-3000:]
    finally:
        kube.patch(path("nodes", name=sparse), {"spec": {"taints": None}})
        kube.delete(path("nodes", name=outside))
