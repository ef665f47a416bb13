"""Compaction for real: kwok nodes, the default scheduler's spread, then Compactor's webhook,
controller, compaction scheduler and the real descheduler free nodes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcluster import Cluster, Kube
from localcluster.cluster.control_plane import NodeShape
from localcluster.cluster.kube import path, wait_for
from localcluster.cluster.stack import CompactorStack
from localcluster.demo.compaction_run import Outcome, run
from localcluster.demo.scenario import POLICY, standard


@pytest.fixture(scope="module")
def outcome(e2e_cluster: Cluster, e2e_kube: Kube, stack: CompactorStack) -> Outcome:
    # The demo's 12 nodes. Bounded: a run that has not converged in five minutes fails the
    # assertions below.
    return run(e2e_cluster, e2e_kube, stack, standard(), interval=0.5, max_seconds=300,
               log=True)


def assert_planned_evictions(outcome: Outcome) -> None:
    """What every planned compaction shows: it evicts only from the nodes it frees, never
    more than those nodes held, and never in vain."""
    r = outcome.report
    assert r.nodes_after < r.nodes_before, r.table()
    assert r.futile_evictions == 0, r.table()
    assert r.evictions_off_freed == r.descheduler_evictions, r.table()
    assert r.descheduler_evictions <= r.movable_on_freed, r.table()
    # Every replacement of a drain's evictee the controller saw land, landed where the plan
    # keeps nodes.
    assert r.landings.get("free_node", 0) == 0, r.table()
    assert sum(r.landings.values()) > 0 or not r.descheduler_evictions, r.table()


def assert_within_limits(outcome: Outcome, descheduler: Mapping[str, Any]) -> None:
    """No descheduler run evicted more than the policy's limits allow: per node, per
    namespace and in all."""
    assert outcome.runs
    for run_ in outcome.runs:
        assert len(run_.evicted) <= descheduler["maxNoOfPodsToEvictTotal"], run_.evicted
        per_node = Counter(node for _, node in run_.evicted).values()
        assert max(per_node, default=0) <= descheduler["maxNoOfPodsToEvictPerNode"]
        per_namespace = Counter(pod.split("/")[0] for pod, _ in run_.evicted).values()
        assert max(per_namespace, default=0) <= descheduler["maxNoOfPodsToEvictPerNamespace"]


def test_managed_pods_end_on_the_nodes_the_plan_keeps_with_no_futile_eviction(
        outcome: Outcome) -> None:
    r = outcome.report
    # The Pods that may not move stay where the default scheduler spread them, so the
    # packing that leaves them in place is the most any run can reach; the FFD packing of
    # every request is reached only where they happen to sit on its nodes. The drains take
    # only nodes under the policy's thresholds as sources, so a run may keep more nodes than
    # that packing: as many as the plan forecast (the next test).
    assert r.lower_bound <= r.nodes_after < r.nodes_before, r.table()
    assert r.ffd_around_blockers >= r.ffd_packing, r.table()
    assert_planned_evictions(outcome)


def test_the_preview_forecasts_the_nodes_the_run_keeps(outcome: Outcome) -> None:
    """kubectl compactor plan, run with the scenario's policy as a file just before it is
    applied, forecasts the nodes that still hold a Pod after the run (counted as it counts:
    no DaemonSet Pod, placeholder or Compactor's own scheduler Pod): exactly."""
    r = outcome.report
    assert r.predicted_after is not None and r.kept_after is not None
    assert r.kept_after == r.predicted_after, (
        f"kept {r.kept_after}, forecast {r.predicted_after}\n{r.table()}\n"
        f"freeable: {outcome.forecast['freeable']}")


def test_no_budget_is_violated_and_nothing_protected_moves(outcome: Outcome) -> None:
    assert outcome.report.pdb_violations == 0
    assert outcome.report.protected_moved == 0
    before = {p.uid: p.node for p in outcome.before if p.protected}
    after = {p.uid: p.node for p in outcome.after if p.protected}
    assert before == after


def test_every_managed_pod_has_the_policy_label_and_every_moved_one_the_scheduler(
        outcome: Outcome) -> None:
    """Without the runtime hook the Pods placed before the policy keep their scheduler until
    a drain replaces them (the controller labels them in place); every replacement is the
    compaction scheduler's."""
    managed = [p for p in outcome.after if p.managed]
    assert managed
    before = {p.uid for p in outcome.before}
    moved = [p for p in managed if p.uid not in before]
    assert moved
    assert {p.scheduler for p in moved} == {"compactor-scheduler"}, [
        p for p in moved if p.scheduler != "compactor-scheduler"]
    assert {p.policy_label for p in managed} == {POLICY}
    assert all(p.phase == "Running" for p in managed)


def test_no_descheduler_run_exceeds_the_policy_limits(outcome: Outcome) -> None:
    assert_within_limits(outcome, standard().policy_spec["descheduler"])


def test_one_sparse_node_is_left_alone_with_number_of_nodes_one(
        outcome: Outcome, e2e_cluster: Cluster, e2e_kube: Kube, stack: CompactorStack,
        tmp_path: Path) -> None:
    """numberOfNodes: 1 needs two underutilised nodes; a pool with one acts on nothing. The
    planner applies the gate (the rendered descheduler runs no HighNodeUtilization), so the
    sparse node, whose one Pod could move, is never tainted and nothing is evicted."""
    kube = e2e_kube
    pool = ["gate-dense", "gate-sparse"]
    e2e_cluster.add_nodes(kube, pool, NodeShape(), labels={"compactor.test/pool": "gate"})
    kube.ensure_namespace("gate", default_service_account=True)
    for name, node, replicas, cpu in (("dense", pool[0], 3, "1"), ("sparse", pool[1], 1,
                                                                   "200m")):
        kube.create(path("deployments", "gate"), {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"nodeName": node, "containers": [{
                                      "name": "c", "image": "pause",
                                      "resources": {"requests": {"cpu": cpu,
                                                                 "memory": "64Mi"}}}]}}}})
    policy = path("clustercompactionpolicies", name="gate", api="apis/compactor.dev/v1alpha1")
    kube.apply(policy, {
        "apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
        "metadata": {"name": "gate"},
        "spec": {"scope": {"namespaceSelector": {"operator": "In", "values": ["gate"]}},
                 "descheduler": {
                     "nodeSelector": {"matchLabels": {"compactor.test/pool": "gate"}},
                     "highNodeUtilization": {"numberOfNodes": 1,
                                             "thresholds": {"cpu": 50, "memory": 50,
                                                            "pods": 50}}}}})
    cm = wait_for("the gate policy's descheduler ConfigMap", lambda: kube.get(
        path("configmaps", "compactor-system", "compactor-descheduler-gate")))
    (profile,) = yaml.safe_load(cm["data"]["policy.yaml"])["profiles"]
    assert set(profile["plugins"]) == {"filter", "preevictionfilter", "deschedule"}
    wait_for("gate pods running", lambda: sum(
        1 for p in kube.items(path("pods", "gate")) if p["status"].get("phase") == "Running")
        == 4)

    def gated() -> list[str] | None:
        plan = kube.get(policy).get("status", {}).get("plan") or {}
        reasons = [r for u in plan.get("unremovable", []) if u["node"] == pool[1]
                   for r in u["reasons"]]
        return reasons or None
    wait_for("gate pods managed", lambda: all(
        p["metadata"]["labels"].get("compactor.dev/policy") == "gate"
        for p in kube.items(path("pods", "gate"))))
    # The sparse Pod is managed and would fit on the dense node: the gate alone holds it.
    expected = ["only 1 underutilized nodes; numberOfNodes is 1"]
    try:
        wait_for("the plan's verdict on the sparse node", lambda: gated() == expected)
    except TimeoutError as e:
        raise AssertionError(f"{gated()} != {expected}") from e
    taints = kube.get(path("nodes", name=pool[1]))["spec"].get("taints") or []
    assert not any(t["key"] == "compactor.dev/drain" for t in taints), taints
    assert not any("compactor.dev/draining" in p["metadata"]["labels"]
                   for p in kube.items(path("pods", "gate")))
    result = stack.run_descheduler("gate")
    assert result.evicted == []
