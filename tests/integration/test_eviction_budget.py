"""A workload's eviction budget and the rule against ping-pong, on the real API server: once
the budget is spent the drain stops and no Pod is marked, and a restarted controller reads
the count back from the workload; an invalid value marks nothing and is named by one Warning
Event over many passes and a restart; a Pod that replaced one of Compactor's evictions keeps
its node until it has run ``evictReplacementsAfter``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from compaction import names
from compaction.validation import validate_policy
from controller.process.reconciler import Reconciler
from localcluster import ApiError, Cluster, Kube
from localcluster.cluster.kube import path, wait_for
from tests.integration.conftest import Policies
from tests.integration.test_drain import _drain_taint, _setup
from tests.integration.test_node_events import _restarted


def _marked(kube: Kube, ns: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in kube.items(path("pods", ns), "app=light")
                  if names.DRAINING_LABEL in p["metadata"]["labels"]
                  and not p["metadata"].get("deletionTimestamp"))


def _reasons(kube: Kube, policies: Policies, name: str, node: str) -> list[str]:
    return [r for u in kube.get(policies.path(name))["status"]["plan"]["unremovable"]
            if u["node"] == node for r in u["reasons"]]


def _warnings(kube: Kube, ns: str) -> list[dict[str, Any]]:
    return [e for e in kube.items(path("events", ns))
            if e["involvedObject"]["kind"] == "Deployment"
            and e["involvedObject"]["name"] == "light" and e["reason"] == "EvictionBudgetInvalid"]


def _annotate(kube: Kube, ns: str, value: str | None) -> None:
    kube.patch(path("deployments", ns, "light"), {"metadata": {"annotations": {
        names.EVICTION_BUDGET_ANNOTATION: value}}})


async def _passes(reconciler: Reconciler, count: int = 1) -> None:
    for _ in range(count):
        summary = await reconciler.reconcile()
        assert not summary.errors, summary.errors


@pytest.mark.asyncio
async def test_the_budget_the_interval_and_an_invalid_value_across_passes_and_restarts(
        cluster: Cluster, kube: Kube, namespace: str, workloads: Cluster,
        compaction_policies: Policies, in_process_reconciler: Reconciler) -> None:
    pool, dense, sparse = _setup(cluster, kube, namespace)  # two light Pods on sparse
    _annotate(kube, namespace, "2/1h")
    # The interval off at first: the budget alone decides. Only sparse is a source (dense
    # runs 50% of its CPU), so nothing but the light Pods ever moves.
    name = compaction_policies.make(namespace, {"descheduler": {
        "nodeSelector": {"matchLabels": {"compactor.test/pool": pool}},
        "highNodeUtilization": {"thresholds": {"cpu": 40, "memory": 90, "pods": 90}},
        "evictReplacementsAfter": "0s"}})

    # The budget allows the two evictions freeing the node takes: the drain starts and marks
    # one Pod (one per descheduler run), counted on the workload as it is marked.
    await _passes(in_process_reconciler)
    assert _drain_taint(kube, sparse) is not None
    (first,) = _marked(kube, namespace)
    record = json.loads(kube.get(path("deployments", namespace, "light"))["metadata"][
        "annotations"][names.EVICTIONS_ANNOTATION])
    uid = kube.get(path("pods", namespace, first))["metadata"]["uid"]
    assert [e[1] for e in record["evictions"]] == [uid]

    # The descheduler evicts it (here through the Eviction API); its replacement comes back
    # to the node (the template names it), so freeing it takes two evictions again, and the
    # budget has one left: the drain stops, and no Pod is marked, by this controller or a
    # restarted one.
    kube.create(path("pods", namespace, first, sub="eviction"), {
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": first, "namespace": namespace}})
    wait_for("the evicted Pod replaced", lambda: first not in {
        p["metadata"]["name"] for p in kube.items(path("pods", namespace), "app=light")}
        and len(kube.items(path("pods", namespace), "app=light")) == 2)
    await _passes(in_process_reconciler, 2)
    assert _drain_taint(kube, sparse) is None and _marked(kube, namespace) == []
    spent = (f"freeing the node takes 2 evictions of Deployment {namespace}/light, whose "
             "eviction budget allows 1 more now")
    assert spent in _reasons(kube, compaction_policies, name, sparse)
    await _restarted(cluster, passes=2)
    assert _drain_taint(kube, sparse) is None and _marked(kube, namespace) == []
    assert spent in _reasons(kube, compaction_policies, name, sparse)

    # An invalid value: no Pod marked, and one Warning Event naming it over many passes and
    # a restart.
    _annotate(kube, namespace, "1/fortnight")
    await _passes(in_process_reconciler, 3)
    await _restarted(cluster, passes=2)
    await _passes(in_process_reconciler, 2)
    assert _drain_taint(kube, sparse) is None and _marked(kube, namespace) == []
    (warning,) = _warnings(kube, namespace)
    assert warning["type"] == "Warning" and warning.get("count") in (None, 0, 1)
    assert "'1/fortnight'" in warning["message"], warning["message"]
    assert any("'1/fortnight' is invalid" in r
               for r in _reasons(kube, compaction_policies, name, sparse))

    # No budget, and the interval back to its default (5m): the replacement ran less than
    # that, and keeps the node; at 1s, the node drains.
    _annotate(kube, namespace, None)
    kube.patch(compaction_policies.path(name),
               {"spec": {"descheduler": {"evictReplacementsAfter": None}}})
    await _passes(in_process_reconciler, 2)
    assert _drain_taint(kube, sparse) is None and _marked(kube, namespace) == []
    assert any("replaced one Compactor evicted" in r
               for r in _reasons(kube, compaction_policies, name, sparse))
    kube.patch(compaction_policies.path(name),
               {"spec": {"descheduler": {"evictReplacementsAfter": "1s"}}})
    await asyncio.sleep(1.5)
    await _passes(in_process_reconciler)
    assert _drain_taint(kube, sparse) is not None and len(_marked(kube, namespace)) == 1
    assert len(_warnings(kube, namespace)) == 1


@pytest.mark.parametrize(("value", "valid"), [
    ("0s", True), ("90s", True), ("1h30m", True), ("0.5s", True),
    ("0", False), ("5", False), ("-1m", False), ("5 minutes", False), ("", False)])
def test_the_api_server_and_the_parser_agree_on_evict_replacements_after(
        kube: Kube, compaction_policies: Policies, value: str, valid: bool) -> None:
    spec = {"descheduler": {"evictReplacementsAfter": value}}
    problems = validate_policy({"kind": "ClusterCompactionPolicy", "metadata": {"name": "p"},
                                "spec": spec})
    if valid:
        assert problems == []
        name = compaction_policies.make("default", spec)
        assert kube.get(compaction_policies.path(name))["spec"]["descheduler"][
            "evictReplacementsAfter"] == value
        return
    assert [p.path for p in problems] == ["spec.descheduler.evictReplacementsAfter"]
    with pytest.raises(ApiError) as refused:
        compaction_policies.make("default", spec)
    assert refused.value.status == 422
    assert "evictReplacementsAfter" in refused.value.message
