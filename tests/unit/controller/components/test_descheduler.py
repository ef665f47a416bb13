"""Rendering the per-policy DeschedulerPolicy and CronJob from a parsed policy."""

from __future__ import annotations

from typing import Any

import pytest

from compaction.policy import Policy
from compaction.validation import parse_policy
from controller.components.descheduler import (
    descheduler_configmap,
    descheduler_cronjob,
    render_descheduler_policy,
)
from controller.components.pod_settings import RuntimeSettings
from tests.reference import reference_policies


def _p(spec: dict[str, Any]) -> Policy:
    return parse_policy({"metadata": {"name": "pack", "uid": "uid-1"}, "spec": spec})


def _args(doc: dict[str, Any], plugin: str) -> dict[str, Any]:
    (profile,) = doc["profiles"]
    found: dict[str, Any] = next(c["args"] for c in profile["pluginConfig"]
                                 if c["name"] == plugin)
    return found


def test_aggressive_reference_example_renders_its_limits() -> None:
    doc = render_descheduler_policy(
        parse_policy(reference_policies()["production-workers-aggressive"]), {})
    assert doc["apiVersion"] == "descheduler/v1alpha2" and doc["kind"] == "DeschedulerPolicy"
    assert (doc["maxNoOfPodsToEvictPerNode"], doc["maxNoOfPodsToEvictPerNamespace"],
            doc["maxNoOfPodsToEvictTotal"]) == (2, 4, 6)
    assert "nodeSelector" not in doc


def test_label_selector_is_the_policy_label_and_the_evictors_own_selector() -> None:
    doc = render_descheduler_policy(_p({"descheduler": {"defaultEvictor": {
        "labelSelector": {"matchLabels": {"tier": "worker"}}}}}), {})
    assert _args(doc, "DefaultEvictor")["labelSelector"] == {"matchExpressions": [
        {"key": "compactor.dev/policy", "operator": "In", "values": ["pack"]},
        {"key": "compactor.dev/workload-kind", "operator": "In",
         "values": ["Deployment", "StatefulSet"]},
        {"key": "compactor.dev/suppressed", "operator": "DoesNotExist"},
        {"key": "compactor.dev/protected", "operator": "DoesNotExist"},
        {"key": "compactor.dev/draining", "operator": "In", "values": ["pack"]},
        {"key": "tier", "operator": "In", "values": ["worker"]},
    ]}


def test_the_planners_drains_are_evicted_by_the_taint_plugin_alone() -> None:
    doc = render_descheduler_policy(_p({"descheduler": {"highNodeUtilization": {
        "numberOfNodes": 2, "thresholds": {"cpu": 60, "memory": 60, "pods": 50}}}}), {})
    taints = _args(doc, "RemovePodsViolatingNodeTaints")
    assert taints == {"includePreferNoSchedule": True,
                      "includedTaints": ["compactor.dev/drain"],
                      "namespaces": {"exclude": ["compactor-system", "kube-system"]},
                      "labelSelector": _args(doc, "DefaultEvictor")["labelSelector"]}
    # HighNodeUtilization has no label selector of its own, so nothing could keep the evict
    # annotation from taking any Pod of its underutilized nodes: the planner applies its
    # thresholds and numberOfNodes, and nothing renders it.
    (profile,) = doc["profiles"]
    assert [c["name"] for c in profile["pluginConfig"]] == [
        "DefaultEvictor", "RemovePodsViolatingNodeTaints"]
    assert profile["plugins"] == {"filter": {"enabled": ["DefaultEvictor"]},
                                  "preevictionfilter": {"enabled": ["DefaultEvictor"]},
                                  "deschedule": {"enabled": ["RemovePodsViolatingNodeTaints"]}}


@pytest.mark.parametrize("spec", [
    {},
    {"descheduler": {"defaultEvictor": {"evictDaemonSetPods": True,
                                        "labelSelector": {"matchLabels": {"tier": "web"}}}}},
])
def test_the_taint_plugin_holds_the_whole_eviction_selector_itself(spec: dict[str, Any]
                                                                    ) -> None:
    # The DefaultEvictor's filter passes a Pod annotated descheduler.alpha.kubernetes.io/evict
    # before it checks its selector; the plugin's own selector is applied before the evictor.
    doc = render_descheduler_policy(_p(spec), {})
    mine = _args(doc, "RemovePodsViolatingNodeTaints")["labelSelector"]
    evictors = _args(doc, "DefaultEvictor")["labelSelector"]
    assert mine == evictors and mine is not evictors  # equal, and no YAML alias between them
    keys = [e["key"] for e in mine["matchExpressions"]]
    assert keys[:5] == ["compactor.dev/policy", "compactor.dev/workload-kind",
                        "compactor.dev/suppressed", "compactor.dev/protected",
                        "compactor.dev/draining"]
    assert keys[5:] == (["tier"] if spec else [])


def test_a_namespaced_policys_taint_plugin_is_held_to_its_namespace() -> None:
    policy = parse_policy({"kind": "CompactionPolicy",
                           "metadata": {"name": "team", "namespace": "shop", "uid": "u"},
                           "spec": {}})
    taints = _args(render_descheduler_policy(policy, {}), "RemovePodsViolatingNodeTaints")
    assert taints["namespaces"] == {"include": ["shop"]}
    assert {"key": "compactor.dev/policy", "operator": "In", "values": ["shop.team"]} in \
        taints["labelSelector"]["matchExpressions"]


@pytest.mark.parametrize(("evictor", "protections"), [
    ({}, {"extraEnabled": ["PodsWithPVC"]}),
    ({"ignorePvcPods": False}, None),
    ({"evictLocalStoragePods": True, "evictDaemonSetPods": True,
      "evictSystemCriticalPods": True, "ignorePvcPods": False},
     {"defaultDisabled": ["PodsWithLocalStorage", "DaemonSetPods", "SystemCriticalPods"]}),
])
def test_evictor_flags_become_pod_protections_not_deprecated_booleans(
        evictor: dict[str, Any], protections: dict[str, list[str]] | None) -> None:
    args = _args(render_descheduler_policy(_p({"descheduler": {"defaultEvictor": evictor}}), {}),
                 "DefaultEvictor")
    assert args.get("podProtections") == protections
    assert not {"evictLocalStoragePods", "evictDaemonSetPods", "evictSystemCriticalPods",
                "ignorePvcPods"} & set(args)


def test_daemonset_pods_are_evictable_only_when_the_policy_says_so() -> None:
    doc = render_descheduler_policy(_p({"descheduler": {"defaultEvictor": {
        "evictDaemonSetPods": True}}}), {})
    kinds = _args(doc, "DefaultEvictor")["labelSelector"]["matchExpressions"][1]
    assert kinds == {"key": "compactor.dev/workload-kind", "operator": "In",
                     "values": ["DaemonSet", "Deployment", "StatefulSet"]}


def test_plugin_sets_use_the_v1alpha2_json_keys() -> None:
    plugins = render_descheduler_policy(_p({}), {})["profiles"][0]["plugins"]
    assert set(plugins) <= {"presort", "sort", "deschedule", "balance", "filter",
                            "preevictionfilter"}


def test_node_selector_wildcards_are_expanded_against_observed_node_labels() -> None:
    policy = parse_policy(reference_policies()["batch-pool-compaction"])
    observed = {"cloud.google.com/gke-nodepool": ["batch-a", "web", "batch-b"]}
    doc = render_descheduler_policy(policy, observed)
    assert doc["nodeSelector"] == "cloud.google.com/gke-nodepool in (batch-a,batch-b)"
    # nodeFit judges the pool's nodes only: the evictor gets the same selector.
    assert _args(doc, "DefaultEvictor")["nodeSelector"] == doc["nodeSelector"]
    # A new pool appearing changes the rendering, so the controller re-renders on node changes.
    observed["cloud.google.com/gke-nodepool"].append("batch-c")
    assert render_descheduler_policy(policy, observed)["nodeSelector"].endswith(
        "(batch-a,batch-b,batch-c)")


def test_a_pool_pattern_matching_no_node_renders_a_selector_that_parses_and_matches_none() -> None:
    policy = parse_policy(reference_policies()["batch-pool-compaction"])
    doc = render_descheduler_policy(policy, {"cloud.google.com/gke-nodepool": ["web"]})
    key = "cloud.google.com/gke-nodepool"
    assert doc["nodeSelector"] == f"{key},!{key}"
    assert "*" not in doc["nodeSelector"]
    assert _args(doc, "DefaultEvictor")["nodeSelector"] == doc["nodeSelector"]


def test_cronjob_runs_once_per_interval_forbids_overlap_and_is_owned_by_the_policy() -> None:
    policy = _p({"descheduler": {"interval": "*/15 * * * *"}})
    cron = descheduler_cronjob(policy, RuntimeSettings().descheduler, suspend=True)
    assert cron["metadata"]["name"] == "compactor-descheduler-pack"
    assert cron["metadata"]["namespace"] == "compactor-system"
    assert cron["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert cron["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "compactor"
    spec = cron["spec"]
    assert (spec["schedule"], spec["concurrencyPolicy"], spec["suspend"]) == (
        "*/15 * * * *", "Forbid", True)
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "registry.k8s.io/descheduler/descheduler:v0.36.0"
    assert container["command"][1] == "--policy-config-file=/policy-dir/policy.yaml"
    assert not any("descheduling-interval" in a for a in container["command"])
    assert pod["volumes"][0]["configMap"]["name"] == "compactor-descheduler-pack"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_configmap_carries_the_policy_under_policy_yaml() -> None:
    policy = _p({})
    cm = descheduler_configmap(policy, render_descheduler_policy(policy, {}))
    assert cm["metadata"]["name"] == "compactor-descheduler-pack"
    assert "kind: DeschedulerPolicy" in cm["data"]["policy.yaml"]
    assert "&id" not in cm["data"]["policy.yaml"]  # the two selectors are written out in full
