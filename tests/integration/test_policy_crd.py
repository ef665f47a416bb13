"""The ClusterCompactionPolicy CRD on the real API server: accepts the reference examples,
defaults what the reference defaults, rejects invalid policies with readable messages."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from compaction.validation import parse_policy, validate_policy
from localcluster import ApiError, Kube
from localcluster.cluster.kube import path, wait_for
from tests.reference import reference_policies

CRD = Path(__file__).parents[2] / "deploy" / "crds" / "compactor.dev_clustercompactionpolicies.yaml"
API = "apis/compactor.dev/v1alpha1"


def _ccp(name: str | None = None) -> str:
    return path("clustercompactionpolicies", name=name, api=API)


@pytest.fixture(scope="module")
def crd(kube: Kube) -> dict[str, Any]:
    obj = yaml.safe_load(CRD.read_text())
    kube.apply(path("customresourcedefinitions", name=obj["metadata"]["name"]), obj)

    def established() -> dict[str, Any] | None:
        got = kube.get(path("customresourcedefinitions", name=obj["metadata"]["name"]))
        conds = {c["type"]: c["status"] for c in (got.get("status") or {}).get("conditions") or []}
        return got if conds.get("Established") == "True" else None

    got = wait_for("CRD established", established)
    wait_for("CRD served", lambda: kube.get(f"/{API}").get("resources"))
    return got


def _fresh(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"] = {"name": f"{obj['metadata']['name'][:20]}-{uuid.uuid4().hex[:6]}"}
    return out


@pytest.mark.parametrize("example", sorted(reference_policies()))
def test_reference_examples_are_accepted_and_parse(crd: dict[str, Any], kube: Kube,
                                                   example: str) -> None:
    obj = _fresh(reference_policies()[example])
    stored = kube.create(_ccp(), obj)
    try:
        policy = parse_policy(stored)
        expected = parse_policy({**reference_policies()[example], "metadata": stored["metadata"]})
        assert policy == expected
        # The alias survives storage instead of being pruned.
        assert stored["spec"]["scheduler"]["useKubexScheduler"] is True
    finally:
        kube.delete(_ccp(obj["metadata"]["name"]))


def test_server_applies_the_reference_defaults(crd: dict[str, Any], kube: Kube) -> None:
    name = f"defaults-{uuid.uuid4().hex[:6]}"
    stored = kube.create(_ccp(), {"apiVersion": "compactor.dev/v1alpha1",
                                  "kind": "ClusterCompactionPolicy", "metadata": {"name": name}})
    try:
        spec = stored["spec"]
        assert spec["enabled"] is True and spec["weight"] == 0
        assert spec["setLabelsByEviction"] is False
        d = spec["descheduler"]
        assert d["interval"] == "*/30 * * * *" and d["loopDetectionWindow"] == "15m"
        assert d["loopDetectionThreshold"] == 3
        assert d["highNodeUtilization"] == {"numberOfNodes": 0,
                                            "thresholds": {"cpu": 25, "memory": 25, "pods": 100}}
        assert d["defaultEvictor"] == {"nodeFit": True, "evictSystemCriticalPods": False,
                                       "evictLocalStoragePods": False, "ignorePvcPods": True,
                                       "evictDaemonSetPods": False}
        assert (d["maxNoOfPodsToEvictPerNode"], d["maxNoOfPodsToEvictPerNamespace"],
                d["maxNoOfPodsToEvictTotal"]) == (1, 1, 1)
        # The server's defaults and the parser's agree.
        assert parse_policy(stored) == parse_policy(
            {"metadata": stored["metadata"], "spec": {}})
    finally:
        kube.delete(_ccp(name))


INVALID = [
    ("interval-30s", {"descheduler": {"interval": "30s"}}, "five-field cron"),
    ("interval-1m", {"descheduler": {"interval": "1m"}}, "five-field cron"),
    ("interval-six-fields", {"descheduler": {"interval": "0 */5 * * * *"}}, "five-field cron"),
    ("external-name-with-managed", {"scheduler": {"externalSchedulerName": "other"}},
     "only be set together with useManagedScheduler: false"),
    ("external-name-with-alias-true", {"scheduler": {"useKubexScheduler": True,
                                                     "externalSchedulerName": "other"}},
     "only be set together with useManagedScheduler: false"),
    ("alias-contradicts", {"scheduler": {"useManagedScheduler": True,
                                         "useKubexScheduler": False}}, "alias"),
    ("namespace-operator", {"scope": {"namespaceSelector": {"operator": "Exists",
                                                            "values": ["a"]}}},
     'supported values: "In", "NotIn"'),
    ("threshold-over-100", {"descheduler": {"highNodeUtilization": {"thresholds": {"cpu": 101}}}},
     "should be less than or equal to 100"),
    ("limit-negative", {"descheduler": {"maxNoOfPodsToEvictPerNode": -1}},
     "should be greater than or equal to 0"),
    ("unknown-workload-type", {"scope": {"workloadTypes": ["ReplicaSet"]}},
     'supported values: "Deployment"'),
    ("window-not-duration", {"descheduler": {"loopDetectionWindow": "15"}}, "Go duration"),
    ("selector-in-without-values", {"scope": {"labelSelector": {"matchExpressions": [
        {"key": "a", "operator": "In"}]}}}, "values must be non-empty for In"),
]


@pytest.mark.parametrize(("spec", "message"), [(s, m) for _, s, m in INVALID],
                         ids=[i for i, _, _ in INVALID])
def test_invalid_policies_are_rejected_with_a_readable_message(
        crd: dict[str, Any], kube: Kube, spec: dict[str, Any], message: str) -> None:
    obj = {"apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
           "metadata": {"name": f"bad-{uuid.uuid4().hex[:6]}"}, "spec": spec}
    with pytest.raises(ApiError) as err:
        kube.create(_ccp(), obj)
    assert err.value.status == 422
    assert message in err.value.message
    # The parser rejects the same objects on its own.
    assert validate_policy(obj)


def test_policy_names_longer_than_thirty_characters_are_rejected(crd: dict[str, Any],
                                                                 kube: Kube) -> None:
    with pytest.raises(ApiError) as err:
        kube.create(_ccp(), {"apiVersion": "compactor.dev/v1alpha1",
                             "kind": "ClusterCompactionPolicy", "metadata": {"name": "a" * 31}})
    assert err.value.status == 422 and "at most 30 characters" in err.value.message


def test_printer_columns_and_short_name(crd: dict[str, Any], kube: Kube) -> None:
    names = crd["spec"]["names"]
    assert names["shortNames"] == ["ccp"] and crd["spec"]["scope"] == "Cluster"
    name = f"cols-{uuid.uuid4().hex[:6]}"
    kube.create(_ccp(), {"apiVersion": "compactor.dev/v1alpha1",
                         "kind": "ClusterCompactionPolicy", "metadata": {"name": name}})
    try:
        table = kube.request("GET", _ccp(name), headers={
            "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        cols = [c["name"] for c in table["columnDefinitions"]]
        assert cols == ["Name", "Enabled", "Scheduler", "Descheduler", "Workloads", "Valid",
                        "Nodes", "Freeable", "Draining", "Age"]
        assert table["rows"][0]["cells"][1:4] == [True, None, True]
    finally:
        kube.delete(_ccp(name))


def test_status_is_a_subresource(crd: dict[str, Any], kube: Kube) -> None:
    name = f"status-{uuid.uuid4().hex[:6]}"
    kube.create(_ccp(), {"apiVersion": "compactor.dev/v1alpha1",
                         "kind": "ClusterCompactionPolicy", "metadata": {"name": name}})
    try:
        # A status written through the main resource is ignored ...
        kube.patch(_ccp(name), {"status": {"managedWorkloads": 3}})
        assert "status" not in kube.get(_ccp(name))
        # ... and accepted through /status.
        kube.request("PATCH", f"{_ccp(name)}/status", {"status": {"managedWorkloads": 3}},
                     "application/merge-patch+json")
        assert kube.get(_ccp(name))["status"]["managedWorkloads"] == 3
    finally:
        kube.delete(_ccp(name))
