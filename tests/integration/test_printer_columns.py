"""What ``kubectl get`` prints for every kind but the cluster compaction policy (tested with
its CRD): the API server's Table for one object, columns and the values a status puts there."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from localcluster import Kube
from localcluster.cluster.kube import path

API = "apis/compactor.dev/v1alpha1"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}

# plural, namespaced, spec, status, columns, the cells after the name (Age left out)
CASES = [
    pytest.param("compactionpolicies", True, {}, {
        "schedulerName": "compactor-scheduler", "managedWorkloads": 3,
        "conditions": [{"type": "Valid", "status": "True", "reason": "Valid", "message": "",
                        "lastTransitionTime": "2026-12-01T12:00:00Z"}],
        "plan": {"nodesInUse": 9, "freeable": 3, "draining": 1}},
        ["Enabled", "Scheduler", "Descheduler", "Workloads", "Valid", "Nodes", "Freeable",
         "Draining"], [True, "compactor-scheduler", True, 3, "True", 9, 3, 1],
        id="CompactionPolicy"),
    pytest.param("staticpolicies", True, {"weight": 5, "containers": [
        {"name": "*", "requests": {"cpu": "100m"}}]},
        {"workloads": 4, "blockedWorkloads": 1, "podsDiffering": 7},
        ["Enabled", "Weight", "Workloads", "Blocked", "Differing"], [True, 5, 4, 1, 7],
        id="StaticPolicy"),
    pytest.param("clusterstaticpolicies", False, {"containers": [
        {"name": "app", "limits": {"memory": "1Gi"}}]},
        {"workloads": 2, "blockedWorkloads": 0, "podsDiffering": 0},
        ["Enabled", "Weight", "Workloads", "Blocked", "Differing"], [True, 0, 2, 0, 0],
        id="ClusterStaticPolicy"),
]


def _kind(plural: str) -> str:
    return {"compactionpolicies": "CompactionPolicy", "staticpolicies": "StaticPolicy",
            "clusterstaticpolicies": "ClusterStaticPolicy"}[plural]


@pytest.mark.parametrize(("plural", "namespaced", "spec", "status", "columns", "cells"), CASES)
def test_kubectl_get_shows_each_kinds_columns(
        kube: Kube, compactor_crds: None, namespace: str, plural: str, namespaced: bool,
        spec: dict[str, Any], status: dict[str, Any], columns: list[str],
        cells: list[Any]) -> None:
    name = f"cols-{uuid.uuid4().hex[:6]}"
    ns = namespace if namespaced else None
    url = path(plural, ns, name, api=API)
    meta: dict[str, Any] = {"name": name, **({"namespace": ns} if ns else {})}
    kube.create(path(plural, ns, api=API), {"apiVersion": "compactor.dev/v1alpha1",
                                            "kind": _kind(plural), "metadata": meta,
                                            "spec": spec})
    try:
        kube.request("PATCH", f"{url}/status", {"status": status},
                     "application/merge-patch+json")
        table = kube.request("GET", url, headers=TABLE)
        assert [c["name"] for c in table["columnDefinitions"]] == ["Name", *columns, "Age"]
        (row,) = table["rows"]
        assert row["cells"][0] == name and row["cells"][1:-1] == cells
    finally:
        kube.delete(url)


def test_kubectl_get_shows_the_policy_evaluations_validity_and_unknown_types(
        kube: Kube, compactor_crds: None) -> None:
    url = path("policyevaluations", name="policy-evaluation", api=API)
    existed = kube.find(url)  # the controller's default, if one was created
    if existed is None:
        kube.create(path("policyevaluations", api=API), {
            "apiVersion": "compactor.dev/v1alpha1", "kind": "PolicyEvaluation",
            "metadata": {"name": "policy-evaluation"},
            "spec": {"precedence": [{"type": "ClusterCompactionPolicy", "priority": 100}]}})
    before = (existed or {}).get("status")
    try:
        kube.request("PATCH", f"{url}/status", {"status": {
            "unknownTypes": ["ProactivePolicy"],
            "conditions": [{"type": "Valid", "status": "True", "reason": "Valid", "message": "",
                            "lastTransitionTime": "2026-12-01T12:00:00Z"}]}},
            "application/merge-patch+json")
        table = kube.request("GET", url, headers=TABLE)
        assert [c["name"] for c in table["columnDefinitions"]] == [
            "Name", "Valid", "Unknown", "Age"]
        (row,) = table["rows"]
        assert row["cells"][:3] == ["policy-evaluation", "True", '["ProactivePolicy"]']
    finally:
        if existed is None:
            kube.delete(url)
        elif before is not None:
            kube.request("PATCH", f"{url}/status", {"status": before},
                         "application/merge-patch+json")

