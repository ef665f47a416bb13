"""The namespaced CompactionPolicy and the PolicyEvaluation as parsed: what a namespace owner
may set, the policy's id (property tests with hypothesis), the singleton's problems."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction import names
from compaction.evaluation import DEFAULT_PRIORITIES, default_manifest, parse_evaluation
from compaction.policy import RESERVED, policy_id
from compaction.validation import parse_policy, validate_policy
from tests.reference import reference_policy_evaluation

# A DNS-1123 label (namespace, policy names) and a label value / DNS subdomain.
LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _cp(spec: dict[str, Any], name: str = "team", namespace: str = "shop") -> dict[str, Any]:
    return {"apiVersion": "compactor.dev/v1alpha1", "kind": "CompactionPolicy",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def test_a_compaction_policy_reads_like_a_cluster_one_with_its_namespace() -> None:
    p = parse_policy(_cp({"weight": 7, "scope": {"workloadTypes": ["Deployment"]}}))
    assert (p.kind, p.namespace, p.key, p.id) == (
        "CompactionPolicy", "shop", "CompactionPolicy/shop/team", "shop.team")
    assert p.weight == 7 and p.scope.namespace_selector is None


def _set(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    at = spec
    for key in path[:-1]:
        at = at.setdefault(key, {})
    at[path[-1]] = value
    return spec


WIDENING: dict[str, Any] = {
    "spec.scope.namespaceSelector": {"operator": "In", "values": ["other"]},
    "spec.descheduler.nodeSelector": {"matchLabels": {"pool": "a"}},
    "spec.descheduler.maxDrainingNodes": 3,
    "spec.descheduler.defaultEvictor.evictSystemCriticalPods": True,
    "spec.descheduler.defaultEvictor.evictLocalStoragePods": True,
    "spec.descheduler.defaultEvictor.evictDaemonSetPods": True,
    "spec.descheduler.defaultEvictor.ignorePvcPods": False,
}


@pytest.mark.parametrize("reserved", RESERVED, ids=lambda r: r.field)
def test_what_widens_the_reach_is_the_cluster_admins(reserved: Any) -> None:
    assert set(WIDENING) == {r.field for r in RESERVED}
    spec = _set(reserved.path, WIDENING[reserved.field])
    (problem,) = [p for p in validate_policy(_cp(spec)) if p.path == reserved.field]
    assert "may not be set" in problem.message and reserved.why in problem.message
    # The same on a cluster policy is fine.
    assert not validate_policy({**_cp(spec), "kind": "ClusterCompactionPolicy",
                                "metadata": {"name": "team"}})
    # And the safe value (the default) is accepted on a namespaced one.
    if reserved.allowed is not None:
        assert not validate_policy(_cp(_set(reserved.path, reserved.allowed)))


def test_a_namespace_owner_may_set_everything_else() -> None:
    assert not validate_policy(_cp({
        "enabled": True, "weight": 100, "setLabelsByEviction": True,
        "scope": {"labelSelector": {"matchLabels": {"app": "web"}},
                  "workloadTypes": ["Deployment", "StatefulSet"]},
        "scheduler": {"useManagedScheduler": False, "externalSchedulerName": "bin-packer"},
        "descheduler": {"interval": "*/10 * * * *", "maxNoOfPodsToEvictPerNode": 2,
                        "maxNoOfPodsToEvictTotal": 5, "defaultEvictor": {"nodeFit": False},
                        "highNodeUtilization": {"thresholds": {"cpu": 50, "memory": 50}}}}))


@pytest.mark.parametrize(("meta", "field"), [
    ({"name": "team"}, "metadata.namespace"),
    ({"name": "team", "namespace": "kube-system"}, "metadata.namespace"),
    ({"name": "team", "namespace": "compactor-system"}, "metadata.namespace"),
    ({"name": "Team", "namespace": "shop"}, "metadata.name"),
    ({"name": "t" * 64, "namespace": "shop"}, "metadata.name"),
])
def test_a_namespaced_policy_needs_a_managed_namespace_and_a_label_safe_name(
        meta: dict[str, str], field: str) -> None:
    obj = {"kind": "CompactionPolicy", "metadata": meta, "spec": {}}
    assert field in [p.path for p in validate_policy(obj)]


namespaces = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True)


@given(namespaces, namespaces)
def test_a_policy_id_fits_label_values_and_object_names_and_never_collides_with_a_cluster_name(
        namespace: str, name: str) -> None:
    pid = policy_id(namespace, name)
    assert len(pid) <= names.MAX_POLICY_ID and LABEL_VALUE.match(pid) and SUBDOMAIN.match(pid)
    assert len(names.descheduler_name(pid)) <= 52
    assert pid.count(".") == 1 and not LABEL.match(pid)  # cluster policy names have no dot
    if len(f"{namespace}.{name}") <= names.MAX_POLICY_ID:
        assert pid == f"{namespace}.{name}"
    assert policy_id("", name) == name


@given(st.lists(st.tuples(namespaces, namespaces), min_size=2, max_size=30, unique=True))
def test_distinct_namespaced_policies_get_distinct_ids(pairs: list[tuple[str, str]]) -> None:
    assert len({policy_id(ns, n) for ns, n in pairs}) == len(pairs)


def test_the_reference_policy_evaluation_parses_and_its_other_types_are_unknown() -> None:
    evaluation, problems = parse_evaluation(reference_policy_evaluation())
    assert not problems
    assert set(evaluation.unknown) == {
        "ContainerArgsPolicy", "PodAffinityPolicy", "RollbackPolicy", "ClusterRollbackPolicy",
        "GpuReactivePolicy", "ClusterGpuReactivePolicy", "ProactivePolicy",
        "ClusterProactivePolicy"}
    # It names the resource kinds Compactor implements (at their default 90), and neither
    # compaction kind: those keep their defaults.
    assert evaluation.known == ("StaticPolicy", "ClusterStaticPolicy")
    assert {k: evaluation.priority(k) for k in DEFAULT_PRIORITIES} == DEFAULT_PRIORITIES


@pytest.mark.parametrize(("obj", "path"), [
    ({"metadata": {"name": "other"}, "spec": {}}, "metadata.name"),
    ({"metadata": {"name": "policy-evaluation"}, "spec": {"precedence": [
        {"type": "CompactionPolicy", "priority": 1},
        {"type": "CompactionPolicy", "priority": 2}]}}, "spec.precedence[1].type"),
    ({"metadata": {"name": "policy-evaluation"}, "spec": {"precedence": [
        {"type": "CompactionPolicy", "priority": 0}]}}, "spec.precedence[0].priority"),
    ({"metadata": {"name": "policy-evaluation"}, "spec": {"precedence": [
        {"type": "CompactionPolicy", "priority": True}]}}, "spec.precedence[0].priority"),
])
def test_a_faulty_evaluation_names_each_fault_and_ignores_only_that_entry(
        obj: dict[str, Any], path: str) -> None:
    evaluation, problems = parse_evaluation(obj)
    assert path in [p.path for p in problems]
    assert evaluation.priority("CompactionPolicy") in (1, 90)  # the good entry, or the default


def test_the_default_manifest_lists_every_implemented_type_at_its_default() -> None:
    evaluation, problems = parse_evaluation(default_manifest())
    assert not problems and not evaluation.unknown
    assert dict(evaluation.declared) == DEFAULT_PRIORITIES
