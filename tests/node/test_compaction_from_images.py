"""The demo's compaction with every Compactor part running from its image on the real node:
deploy/ installed with kustomize (only the image set), the scenario's Pods on tainted kwok
nodes, the compaction scheduler's Deployment and the descheduler CronJob's Jobs created by the
controller. It reaches what the process-based run reaches (tests/e2e/test_compaction.py):
the nodes the plan forecast (the drains take only nodes under the policy's thresholds, so it
may keep more than the packing around the Pods that cannot move), every eviction spent on a
node that ended freed, nothing protected moved."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from compaction import names
from localcluster import Kube
from localcluster.demo.real_node import (
    IMAGES_ENV,
    RealNodeRun,
    clean_up,
    compact,
    compactor_image,
    images,
)
from localcluster.demo.scenario import POLICY, on_kwok, standard
from localcluster.node.cluster import NodeCluster


@pytest.fixture(scope="module")
def compaction(node: NodeCluster, kube: Kube,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealNodeRun]:
    result, directory = compact(node, kube, compactor_image(images(Path(os.environ[IMAGES_ENV]))),
                                tmp_path_factory.mktemp("from-images"), log=True)
    print("\n" + result.outcome.report.table() + "\n" + result.table())
    yield result
    clean_up(node, kube, on_kwok(standard()), directory)


def test_nodes_after_are_what_the_plan_forecast_and_every_eviction_frees_a_node(
        compaction: RealNodeRun) -> None:
    """The runtime hook replaces only the Pods of the nodes the plan frees, so the run keeps
    at most the nodes the preview forecast before it (a later pass may free more), and no
    eviction is spent on a node that stays."""
    r = compaction.outcome.report
    assert r.nodes_after < r.nodes_before, r.table()
    assert r.lower_bound <= r.nodes_after, r.table()
    assert r.kept_after is not None and r.predicted_after is not None, r.table()
    assert r.kept_after <= r.predicted_after, r.table()
    assert r.futile_evictions == 0, r.table()
    assert r.evictions_from_kept == 0 and r.came_back == 0, r.table()


def test_nothing_protected_moves_and_no_budget_is_violated(compaction: RealNodeRun) -> None:
    r = compaction.outcome.report
    assert r.protected_moved == 0, r.table()
    assert r.pdb_violations == 0, r.table()
    before = {p.uid: p.node for p in compaction.outcome.before if p.protected}
    after = {p.uid: p.node for p in compaction.outcome.after if p.protected}
    assert before == after


def test_every_replaced_pod_ends_on_the_compaction_scheduler(compaction: RealNodeRun) -> None:
    """The runtime hook leaves alone a Pod whose replacement would come back to its node: it
    keeps its scheduler, and the controller labels it in place. Every replacement is the
    compaction scheduler's."""
    managed = [p for p in compaction.outcome.after if p.managed]
    before = {p.uid for p in compaction.outcome.before}
    replaced = [p for p in managed if p.uid not in before]
    assert replaced
    assert {p.scheduler for p in replaced} == {names.MANAGED_SCHEDULER}
    assert {p.policy_label for p in managed} == {POLICY}


def test_every_compactor_part_ran_from_its_image_on_the_real_node(
        compaction: RealNodeRun, node: NodeCluster) -> None:
    """The webhook's and controller's replicas, the scheduler's Pod and the descheduler's Job
    Pods: all on the real node, none on a kwok node; the descheduler ran only as Jobs."""
    pods = compaction.compactor_pods
    for prefix in ("compactor-webhook-", "compactor-controller-", "compactor-scheduler-",
                   names.descheduler_name(POLICY)):
        assert any(name.startswith(prefix) for name in pods), (prefix, pods)
    assert set(pods.values()) == {node.name}, pods
    assert compaction.jobs, "no descheduler Job ran"
    assert compaction.scheduler_seconds is not None
