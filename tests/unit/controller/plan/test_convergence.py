"""Pure parts of admission convergence: compliance, skip rules, fingerprints, loop state."""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

import pytest

from compaction.intent import intent_for
from compaction.selector import LabelSelector, Operator, requirement
from compaction.validation import parse_policy
from compaction.workload import WorkloadType
from controller.plan.convergence import (
    ConvergenceState,
    fingerprint,
    is_compliant,
    is_replacement,
    skip_reason,
)
from controller.snapshot.pod import PodInfo, parse_pod

POLICY = parse_policy({"metadata": {"name": "p"}, "spec": {"setLabelsByEviction": True}})
INTENT = intent_for(POLICY, WorkloadType.DEPLOYMENT)
DEPLOYMENT = WorkloadType.DEPLOYMENT
T0 = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)


def _pod(**over: Any) -> PodInfo:
    """A Pod as the API serves it, read as the controller reads it; ``section__key=value``
    overrides one field."""
    pod: dict[str, Any] = {
        "metadata": {"name": "x", "namespace": "shop", "uid": "u1", "labels": {},
                     "annotations": {}, "creationTimestamp": "2026-12-01T12:00:05Z",
                     "ownerReferences": [{"kind": "ReplicaSet", "name": "x-1",
                                          "controller": True}]},
        "spec": {"nodeName": "n1", "schedulerName": "default-scheduler"},
        "status": {"phase": "Running"},
    }
    for dotted, value in over.items():
        section, key = dotted.split("__")
        pod[section][key] = value
    return parse_pod(pod)


def _compliant() -> PodInfo:
    return _pod(metadata__labels=dict(INTENT.labels),
                metadata__annotations={"compactor.dev/intent": INTENT.render()},
                spec__schedulerName="compactor-scheduler")


def test_compliance_needs_labels_intent_and_scheduler() -> None:
    assert is_compliant(_compliant(), INTENT)
    assert not is_compliant(_pod(), INTENT)
    assert not is_compliant(replace(_compliant(), scheduler_name="default-scheduler"), INTENT)
    gpu = replace(_compliant(), scheduler_name="kai-scheduler")  # kept on purpose by the webhook
    assert is_compliant(gpu, INTENT)


@pytest.mark.parametrize(("scheduler", "exempt", "compliant"), [
    ("kai-scheduler", frozenset({"kai-scheduler"}), True),
    # Left on an external scheduler the policy named before it switched to the managed one:
    # admission would not keep it, so neither does compliance.
    ("my-external", frozenset({"kai-scheduler"}), False),
    ("my-external", frozenset({"kai-scheduler", "my-external"}), True),
    ("kai-scheduler", frozenset(), False),
    ("compactor-scheduler", frozenset(), True),
])
def test_only_the_exempt_schedulers_count_as_compliant_besides_the_intents(
        scheduler: str, exempt: frozenset[str], compliant: bool) -> None:
    pod = replace(_compliant(), scheduler_name=scheduler)
    assert is_compliant(pod, INTENT, exempt) is compliant


SKIPS = [
    ("deleting", {"metadata__deletionTimestamp": "2026-12-01T12:00:00Z"}, "deleting"),
    ("unscheduled", {"spec__nodeName": None}, "unscheduled"),
    ("pending", {"status__phase": "Pending"}, "not running"),
    ("succeeded", {"status__phase": "Succeeded"}, "not running"),
    ("kube-system", {"metadata__namespace": "kube-system"}, "protected namespace"),
    ("safe-to-evict", {"metadata__annotations": {
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}}, "safe-to-evict"),
    ("placeholder", {"spec__priority": -10}, "placeholder"),
    ("below-placeholder", {"spec__priority": -11}, "placeholder"),
    ("critical", {"spec__priorityClassName": "system-node-critical"}, "system critical"),
    ("local-storage", {"spec__volumes": [{"name": "v", "emptyDir": {}}]}, "local storage"),
    ("pvc", {"spec__volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]},
     "pvc"),
]


@pytest.mark.parametrize(("over", "reason"), [(o, r) for _, o, r in SKIPS],
                         ids=[i for i, _, _ in SKIPS])
def test_pods_the_hook_never_replaces(over: dict[str, Any], reason: str) -> None:
    assert skip_reason(_pod(**over), POLICY, {}, LabelSelector(), DEPLOYMENT) == reason


# The reference's workload table: only Deployment and StatefulSet Pods are evicted, DaemonSet
# Pods only with evictDaemonSetPods.
EVICTABLE = {WorkloadType.DEPLOYMENT: True, WorkloadType.STATEFUL_SET: True,
             WorkloadType.DAEMON_SET: False, WorkloadType.CRON_JOB: False,
             WorkloadType.JOB: False, WorkloadType.ROLLOUT: False,
             WorkloadType.ANALYSIS_RUN: False, WorkloadType.STRIMZI_POD_SET: False,
             WorkloadType.MODEL: False}


@pytest.mark.parametrize("kind", list(WorkloadType), ids=[k.value for k in WorkloadType])
def test_the_hook_follows_the_eviction_table(kind: WorkloadType) -> None:
    reason = skip_reason(_pod(), POLICY, {}, LabelSelector(), kind)
    assert (reason is None) is EVICTABLE[kind]
    if not EVICTABLE[kind]:
        assert reason == f"{kind.value} pods are not evicted"


def test_daemonset_pods_and_node_selector_follow_the_policy() -> None:
    sel = LabelSelector((requirement("pool", Operator.IN, "batch"),))
    assert skip_reason(_pod(), POLICY, {"pool": "web"}, sel, DEPLOYMENT) == (
        "node outside nodeSelector")
    assert skip_reason(_pod(), POLICY, {"pool": "batch"}, sel, DEPLOYMENT) is None
    allowing = parse_policy({"metadata": {"name": "p"}, "spec": {"descheduler": {
        "defaultEvictor": {"evictDaemonSetPods": True, "evictLocalStoragePods": True}}}})
    local = _pod(spec__volumes=[{"name": "v", "emptyDir": {}}])
    assert skip_reason(local, allowing, {}, LabelSelector(), WorkloadType.DAEMON_SET) is None
    assert skip_reason(_pod(), allowing, {}, LabelSelector(), WorkloadType.JOB) == (
        "Job pods are not evicted")


def test_fingerprint_depends_on_workload_intent_and_observed_state_only() -> None:
    a, b = _pod(), _pod(metadata__name="other", metadata__uid="u2")
    assert fingerprint("w", INTENT, a) == fingerprint("w", INTENT, b)
    assert fingerprint("w", INTENT, a) != fingerprint("w2", INTENT, a)
    assert fingerprint("w", INTENT, a) != fingerprint("w", INTENT, _compliant())
    # Labels patched in place later do not change what admission decided.
    relabelled = _pod(metadata__labels={"compactor.dev/policy": "p"})
    assert fingerprint("w", INTENT, relabelled) == fingerprint("w", INTENT, a)


def test_state_round_trips_and_forgets_observations_outside_the_window() -> None:
    state = ConvergenceState(last_eviction=T0).observe("f", "u1", T0).observe(
        "f", "u2", T0 + datetime.timedelta(minutes=10))
    assert state.observe("f", "u1", T0) == state  # one Pod is counted once
    again = ConvergenceState.parse({"compactor.dev/convergence": state.render()})
    assert again == state and again.count("f") == 2
    later = again.within(datetime.timedelta(minutes=15), T0 + datetime.timedelta(minutes=20))
    assert later.count("f") == 1
    assert ConvergenceState.parse({"compactor.dev/convergence": "garbage"}) == ConvergenceState()


def test_only_pods_created_after_the_last_eviction_are_outcomes() -> None:
    state = ConvergenceState(last_eviction=T0)
    assert is_replacement(_pod(), state)
    assert not is_replacement(_pod(metadata__creationTimestamp="2026-12-01T11:59:00Z"), state)
    assert not is_replacement(_pod(), ConvergenceState())
