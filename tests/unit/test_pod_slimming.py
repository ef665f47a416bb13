"""The controller's watch cache keeps only part of each Pod, ReplicaSet and Job: every
decision made on the slim copy must equal the one made on the whole object."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

from compaction.intent import intent_for
from compaction.policy import parse_policy
from compaction.selector import LabelSelector, Operator, requirement
from compaction.workload import WorkloadType
from controller.convergence import (
    ConvergenceState,
    fingerprint,
    is_compliant,
    is_replacement,
    skip_reason,
)
from controller.pods import OwnerIndex, is_protected, pod_patch, slim_owner, slim_pod
from controller.runtime_hook import settled
from controller.workloads import workload_object


def _policy(**evictor: bool) -> Any:
    return parse_policy({
        "apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
        "metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"setLabelsByEviction": True,
                 "descheduler": {"defaultEvictor": evictor}}})


POLICIES = [_policy(), _policy(evictLocalStoragePods=True, ignorePvcPods=True,
                               evictSystemCriticalPods=True)]
INTENT = intent_for(POLICIES[0], WorkloadType.DEPLOYMENT)


def _pod(volumes: list[dict[str, Any]], priority: int | None, annotations: dict[str, str],
         scheduler: str, ready: str, labelled: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeName": "n1", "schedulerName": scheduler, "volumes": volumes,
        "serviceAccountName": "default", "tolerations": [{"operator": "Exists"}],
        "containers": [{"name": "app", "image": "registry.example/app:1",
                        "env": [{"name": f"E{i}", "value": "x" * 50} for i in range(20)],
                        "resources": {"requests": {"cpu": "100m"}}}]}
    if priority is not None:
        spec["priority"] = priority
        spec["priorityClassName"] = "system-node-critical" if priority > 10**9 else "low"
    labels = dict(INTENT.labels) if labelled else {"app": "web"}
    if labelled:
        annotations = {**annotations, "compactor.dev/intent": INTENT.render()}
    return {"metadata": {"namespace": "shop", "name": "web-1", "uid": "u1", "labels": labels,
                         "annotations": annotations, "resourceVersion": "7",
                         "managedFields": [{"manager": "kubelet"}],
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": "web-abc", "uid": "r1",
                                              "controller": True}]},
            "spec": spec,
            "status": {"phase": "Running", "podIP": "10.0.0.1", "containerStatuses": [{}],
                       "conditions": [{"type": "Ready", "status": ready}]}}


PODS = [_pod(*combo) for combo in itertools.product(
    [[], [{"name": "d", "emptyDir": {}}], [{"name": "c", "persistentVolumeClaim": {}}]],
    [None, -10, -20, 2_000_001_000],
    [{}, {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}],
    ["default-scheduler", "compactor-scheduler"],
    ["True", "False"],
    [False, True])]


@pytest.mark.parametrize("pod", PODS)
def test_every_decision_on_a_slim_pod_equals_the_one_on_the_whole_pod(pod: dict[str, Any]) -> None:
    slim = slim_pod(copy.deepcopy(pod))
    assert "containers" not in slim["spec"] and "managedFields" not in slim["metadata"]
    for policy in POLICIES:
        for selector in (LabelSelector(), LabelSelector((requirement("zone", Operator.IN, "a"),))):
            assert skip_reason(slim, policy, {"zone": "a"}, selector, WorkloadType.DEPLOYMENT) == \
                skip_reason(pod, policy, {"zone": "a"}, selector, WorkloadType.DEPLOYMENT)
    assert is_compliant(slim, INTENT) == is_compliant(pod, INTENT)
    assert is_protected(slim) == is_protected(pod)
    assert fingerprint("w", INTENT, slim) == fingerprint("w", INTENT, pod)
    state = ConvergenceState()
    assert is_replacement(slim, state) == is_replacement(pod, state)
    for suppressed in (False, True):
        assert pod_patch(slim, INTENT, suppressed) == pod_patch(pod, INTENT, suppressed)
    workload = workload_object(WorkloadType.DEPLOYMENT, {
        "metadata": {"namespace": "shop", "name": "web"}, "spec": {"replicas": 1}}, {})
    assert workload is not None
    assert settled(workload, [slim]) == settled(workload, [pod])


def test_the_owner_chain_is_the_same_through_slim_replicasets() -> None:
    rs = {"metadata": {"namespace": "shop", "name": "web-abc", "uid": "r1",
                       "managedFields": [{}],
                       "ownerReferences": [{"kind": "Deployment", "name": "web",
                                            "controller": True}]},
          "spec": {"template": {"spec": {"containers": [{}]}}}}
    whole = OwnerIndex.build([("ReplicaSet", rs)])
    slim = OwnerIndex.build([("ReplicaSet", slim_owner(copy.deepcopy(rs)))])
    assert slim.chain(PODS[0]) == whole.chain(PODS[0]) == [
        ("ReplicaSet", "shop", "web-abc"), ("Deployment", "shop", "web")]
