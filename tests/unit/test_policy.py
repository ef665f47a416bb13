"""Parsing the policy: defaults from the reference field table, aliases, every problem at once."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from compaction.policy import NamespaceOperator, Policy, SchedulerMode, Thresholds
from compaction.problem import InvalidPolicy
from compaction.selector import Operator, requirement
from compaction.validation import parse_policy, validate_policy
from compaction.workload import DEFAULT_WORKLOAD_TYPES, WorkloadType
from tests.reference import reference_policies


def _policy(spec: dict[str, Any], name: str = "p") -> dict[str, Any]:
    return {"apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
            "metadata": {"name": name}, "spec": spec}


def test_empty_spec_gets_every_default_of_the_reference_table() -> None:
    p = parse_policy(_policy({}))
    assert p.enabled is True and p.weight == 0 and p.set_labels_by_eviction is False
    assert p.scope.label_selector is None and p.scope.namespace_selector is None
    assert p.scope.workload_types == DEFAULT_WORKLOAD_TYPES
    assert [t.value for t in p.scope.workload_types] == [
        "Deployment", "StatefulSet", "CronJob", "Rollout", "Job", "AnalysisRun", "DaemonSet",
        "Model"]
    assert p.scheduler.use_managed_scheduler is True
    assert p.scheduler.scheduler_name == "compactor-scheduler"
    d = p.descheduler
    assert d.enabled is True and not d.node_selector
    assert (d.max_pods_to_evict_per_node, d.max_pods_to_evict_per_namespace,
            d.max_pods_to_evict_total) == (1, 1, 1)
    e = d.default_evictor
    assert (e.node_fit, e.evict_system_critical_pods, e.evict_local_storage_pods,
            e.ignore_pvc_pods, e.evict_daemon_set_pods) == (True, False, False, True, False)
    assert not e.label_selector
    assert d.high_node_utilization.number_of_nodes == 0
    assert d.high_node_utilization.thresholds == Thresholds(cpu=25, memory=25, pods=100)
    assert d.interval == "*/30 * * * *"
    assert d.loop_detection_window == timedelta(minutes=15)
    assert d.loop_detection_threshold == 3
    assert d.suppression_duration == timedelta(minutes=15)


def test_first_reference_example_parses_to_its_documented_behaviour() -> None:
    p = parse_policy(reference_policies()["my-compaction-policy"])
    assert p.scope.namespace_selector is not None
    assert p.scope.namespace_selector.operator is NamespaceOperator.IN
    assert p.scope.namespace_selector.values == ("production",)
    assert p.scope.workload_types == (WorkloadType.DEPLOYMENT, WorkloadType.STATEFUL_SET)
    assert p.scheduler.mode is SchedulerMode.MANAGED  # via the useKubexScheduler alias
    assert p.set_labels_by_eviction is False
    hnu = p.descheduler.high_node_utilization
    assert hnu.number_of_nodes == 0 and hnu.thresholds == Thresholds(65, 65, 65)
    assert p.descheduler.interval == "*/30 * * * *"


def test_conservative_example_needs_two_sparse_nodes_and_runs_hourly() -> None:
    p = parse_policy(reference_policies()["production-web-conservative"])
    assert p.scope.label_selector is not None
    assert set(p.scope.label_selector.requirements) == {
        requirement("app.kubernetes.io/tier", Operator.IN, "web"),
        requirement("compaction.kubex.ai/enabled", Operator.IN, "true"),
    }
    assert p.descheduler.interval == "0 * * * *"
    assert p.descheduler.high_node_utilization.number_of_nodes == 1
    assert p.descheduler.high_node_utilization.thresholds == Thresholds(25, 25, 25)


def test_node_pool_example_keeps_its_wildcard_node_selector_and_defaults_the_rest() -> None:
    p = parse_policy(reference_policies()["batch-pool-compaction"])
    assert p.descheduler.node_selector.requirements == (
        requirement("cloud.google.com/gke-nodepool", Operator.IN, "batch-*"),)
    assert p.descheduler.high_node_utilization.thresholds == Thresholds(40, 40, 30)
    assert p.descheduler.max_pods_to_evict_total == 1


def test_aggressive_example_evicts_more_and_replaces_non_compliant_pods() -> None:
    p = parse_policy(reference_policies()["production-workers-aggressive"])
    assert p.set_labels_by_eviction is True
    d = p.descheduler
    assert (d.max_pods_to_evict_per_node, d.max_pods_to_evict_per_namespace,
            d.max_pods_to_evict_total) == (2, 4, 6)
    assert d.interval == "*/15 * * * *"
    assert d.high_node_utilization.thresholds == Thresholds(60, 60, 50)
    assert p.scope.workload_types == (WorkloadType.DEPLOYMENT,)


@pytest.mark.parametrize(("scheduler", "mode", "name"), [
    ({}, SchedulerMode.MANAGED, "compactor-scheduler"),
    ({"useManagedScheduler": True}, SchedulerMode.MANAGED, "compactor-scheduler"),
    ({"useKubexScheduler": True}, SchedulerMode.MANAGED, "compactor-scheduler"),
    ({"useManagedScheduler": False, "externalSchedulerName": "bin-packer"},
     SchedulerMode.EXTERNAL, "bin-packer"),
    ({"useKubexScheduler": False, "externalSchedulerName": "bin-packer"},
     SchedulerMode.EXTERNAL, "bin-packer"),
    ({"useManagedScheduler": False, "externalSchedulerName": ""},
     SchedulerMode.DESCHEDULER_ONLY, None),
    ({"useManagedScheduler": False}, SchedulerMode.DESCHEDULER_ONLY, None),
], ids=["default", "managed", "alias", "external", "external-via-alias", "desched-only-empty",
        "desched-only-absent"])
def test_scheduler_modes(scheduler: dict[str, Any], mode: SchedulerMode, name: str | None) -> None:
    p = parse_policy(_policy({"scheduler": scheduler}))
    assert p.scheduler.mode is mode
    assert p.scheduler.scheduler_name == name


def test_suppression_duration_defaults_to_the_window_and_can_be_set() -> None:
    p = parse_policy(_policy({"descheduler": {"loopDetectionWindow": "1h30m"}}))
    assert p.descheduler.suppression_duration == timedelta(hours=1, minutes=30)
    p = parse_policy(_policy({"descheduler": {"loopDetectionWindow": "10m",
                                              "suppressionDuration": "2h"}}))
    assert p.descheduler.loop_detection_window == timedelta(minutes=10)
    assert p.descheduler.suppression_duration == timedelta(hours=2)


@pytest.mark.parametrize(("descheduler", "limit"), [
    pytest.param({}, None, id="unset-no-limit"),
    pytest.param({"maxEvictionsToFreeNode": None}, None, id="null-no-limit"),
    pytest.param({"maxEvictionsToFreeNode": 0}, 0, id="zero-nothing-evicted"),
    pytest.param({"maxEvictionsToFreeNode": 5}, 5, id="five"),
])
def test_max_evictions_to_free_node_defaults_to_no_limit(
        descheduler: dict[str, Any], limit: int | None) -> None:
    assert parse_policy(_policy({"descheduler": descheduler})
                        ).descheduler.max_evictions_to_free_node == limit


@pytest.mark.parametrize(("value", "message"), [
    pytest.param(-1, "must be at least 0, not -1", id="negative"),
    pytest.param("3", "must be a whole number, not '3'", id="string"),
    pytest.param(2.5, "must be a whole number, not 2.5", id="fraction"),
    pytest.param(True, "must be a whole number, not True", id="bool"),
    pytest.param(2**31, f"must be at most {2**31 - 1}, not {2**31}", id="above-int32"),
])
def test_a_bad_max_evictions_to_free_node_says_what_is_wrong(value: object,
                                                             message: str) -> None:
    (problem,) = validate_policy(_policy({"descheduler": {"maxEvictionsToFreeNode": value}}))
    assert (problem.path, problem.message) == ("spec.descheduler.maxEvictionsToFreeNode",
                                               message)


INVALID = [
    ("interval-duration-30s", {"descheduler": {"interval": "30s"}}, "spec.descheduler.interval"),
    ("interval-duration-1m", {"descheduler": {"interval": "1m"}}, "spec.descheduler.interval"),
    ("interval-six-fields", {"descheduler": {"interval": "0 */5 * * * *"}},
     "spec.descheduler.interval"),
    ("interval-minute-60", {"descheduler": {"interval": "60 * * * *"}},
     "spec.descheduler.interval"),
    ("interval-hour-24", {"descheduler": {"interval": "0 24 * * *"}}, "spec.descheduler.interval"),
    ("window-not-duration", {"descheduler": {"loopDetectionWindow": "fifteen"}},
     "spec.descheduler.loopDetectionWindow"),
    ("suppression-not-duration", {"descheduler": {"suppressionDuration": "15"}},
     "spec.descheduler.suppressionDuration"),
    ("namespace-operator-exists", {"scope": {"namespaceSelector": {
        "operator": "Exists", "values": ["a"]}}}, "spec.scope.namespaceSelector.operator"),
    ("namespace-values-empty", {"scope": {"namespaceSelector": {
        "operator": "In", "values": []}}}, "spec.scope.namespaceSelector.values"),
    ("threshold-over-100", {"descheduler": {"highNodeUtilization": {"thresholds": {"cpu": 101}}}},
     "spec.descheduler.highNodeUtilization.thresholds.cpu"),
    ("threshold-negative", {"descheduler": {"highNodeUtilization": {"thresholds": {"pods": -1}}}},
     "spec.descheduler.highNodeUtilization.thresholds.pods"),
    ("limit-negative", {"descheduler": {"maxNoOfPodsToEvictTotal": -1}},
     "spec.descheduler.maxNoOfPodsToEvictTotal"),
    ("number-of-nodes-negative", {"descheduler": {"highNodeUtilization": {"numberOfNodes": -2}}},
     "spec.descheduler.highNodeUtilization.numberOfNodes"),
    ("unknown-workload-type", {"scope": {"workloadTypes": ["Deployment", "ReplicaSet"]}},
     "spec.scope.workloadTypes[1]"),
    ("external-with-managed", {"scheduler": {"externalSchedulerName": "x"}},
     "spec.scheduler.externalSchedulerName"),
    ("alias-contradicts", {"scheduler": {"useManagedScheduler": True,
                                         "useKubexScheduler": False}},
     "spec.scheduler.useKubexScheduler"),
    ("selector-bad-operator", {"scope": {"labelSelector": {"matchExpressions": [
        {"key": "a", "operator": "Equals", "values": ["b"]}]}}},
     "spec.scope.labelSelector.matchExpressions[0].operator"),
    ("selector-in-without-values", {"scope": {"labelSelector": {"matchExpressions": [
        {"key": "a", "operator": "In"}]}}},
     "spec.scope.labelSelector.matchExpressions[0].values"),
    ("threshold-zero-loop", {"descheduler": {"loopDetectionThreshold": 0}},
     "spec.descheduler.loopDetectionThreshold"),
    ("enabled-not-bool", {"enabled": "yes"}, "spec.enabled"),
    ("unknown-field", {"descheduler": {"maxPods": 3}}, "spec.descheduler.maxPods"),
]


@pytest.mark.parametrize(("spec", "where"), [(s, w) for _, s, w in INVALID],
                         ids=[i for i, _, _ in INVALID])
def test_invalid_field_is_reported_at_its_path(spec: dict[str, Any], where: str) -> None:
    problems = validate_policy(_policy(spec))
    assert [p.path for p in problems] == [where], problems
    with pytest.raises(InvalidPolicy) as err:
        parse_policy(_policy(spec))
    assert where in str(err.value)


def test_every_problem_is_reported_at_once() -> None:
    spec = {
        "enabled": "yes",
        "scope": {"workloadTypes": ["Deployment", "ReplicaSet"],
                  "namespaceSelector": {"operator": "Exists", "values": ["a"]}},
        "descheduler": {
            "interval": "30s", "maxNoOfPodsToEvictTotal": -1, "loopDetectionWindow": "soon",
            "highNodeUtilization": {"numberOfNodes": -1, "thresholds": {"cpu": 101, "pods": -1}},
        },
    }
    paths = sorted(p.path for p in validate_policy(_policy(spec)))
    assert paths == sorted([
        "spec.enabled", "spec.scope.workloadTypes[1]", "spec.scope.namespaceSelector.operator",
        "spec.descheduler.interval", "spec.descheduler.maxNoOfPodsToEvictTotal",
        "spec.descheduler.loopDetectionWindow",
        "spec.descheduler.highNodeUtilization.numberOfNodes",
        "spec.descheduler.highNodeUtilization.thresholds.cpu",
        "spec.descheduler.highNodeUtilization.thresholds.pods",
    ])


@pytest.mark.parametrize("name", ["", "Upper", "a" * 31, "-lead", "with.dot"])
def test_policy_names_must_fit_the_objects_named_after_them(name: str) -> None:
    problems = validate_policy(_policy({}, name=name))
    assert [p.path for p in problems] == ["metadata.name"]


def test_longest_allowed_name_is_thirty_characters() -> None:
    assert validate_policy(_policy({}, name="a" * 30)) == []


def test_creation_timestamp_and_identity_are_read_from_metadata() -> None:
    obj = _policy({"weight": 7})
    obj["metadata"].update(uid="u-1", generation=4, creationTimestamp="2026-01-02T03:04:05Z")
    p = parse_policy(obj)
    assert (p.uid, p.generation, p.weight) == ("u-1", 4, 7)
    assert p.creation_timestamp is not None and p.creation_timestamp.year == 2026
    assert p.creation_timestamp.utcoffset() == timedelta(0)


def test_an_empty_spec_reads_as_the_models_own_defaults() -> None:
    assert parse_policy(_policy({})) == Policy(name="p")
