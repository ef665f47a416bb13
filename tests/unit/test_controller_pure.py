"""Pure decisions of the controller: workload metadata, Pod metadata, ownership, conditions."""

from __future__ import annotations

from typing import Any

from compaction.intent import intent_for
from compaction.policy import parse_policy
from compaction.workload import WorkloadType
from controller.pods import OwnerIndex, is_protected, pod_patch
from controller.status import Condition, policy_conditions, render_conditions
from controller.workloads import desired_policy, workload_object, workload_patch

POLICY = parse_policy({"metadata": {"name": "p"}, "spec": {}})
INTENT = intent_for(POLICY)


def _deploy(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
            owners: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "shop", "uid": "u",
                         "labels": labels or {}, "annotations": annotations or {},
                         "ownerReferences": owners or []},
            "spec": {"template": {"metadata": {"labels": {"app": "web"}}}}}


def test_unlabelled_workload_gets_label_and_intent_in_metadata_only() -> None:
    w = workload_object(WorkloadType.DEPLOYMENT, _deploy(), {})
    assert workload_patch(w, INTENT) == {"metadata": {
        "labels": {"compactor.dev/policy": "p"},
        "annotations": {"compactor.dev/intent": INTENT.render()}}}


def test_converged_workload_needs_no_patch_and_stale_one_is_cleaned() -> None:
    done = workload_object(WorkloadType.DEPLOYMENT, _deploy(
        {"compactor.dev/policy": "p"}, {"compactor.dev/intent": INTENT.render()}), {})
    assert workload_patch(done, INTENT) is None
    assert workload_patch(done, None) == {"metadata": {
        "labels": {"compactor.dev/policy": None}, "annotations": {"compactor.dev/intent": None}}}
    assert workload_patch(workload_object(WorkloadType.DEPLOYMENT, _deploy(), {}), None) is None


def test_jobs_of_cronjobs_follow_their_owner_instead_of_being_labelled() -> None:
    job = workload_object(WorkloadType.JOB, _deploy(owners=[
        {"kind": "CronJob", "name": "c", "controller": True}]), {})
    assert desired_policy([POLICY], job) is None
    plain_job = workload_object(WorkloadType.JOB, _deploy(), {})
    assert desired_policy([POLICY], plain_job) == POLICY


def test_template_opt_out_is_read_from_the_cronjob_job_template() -> None:
    cron = _deploy()
    cron["spec"] = {"jobTemplate": {"spec": {"template": {"metadata": {"labels": {
        "compactor.dev/ignore": "true"}}}}}}
    assert desired_policy([POLICY], workload_object(WorkloadType.CRON_JOB, cron, {})) is None


def _pod(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
         priority: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {} if priority is None else {"priority": priority}
    return {"metadata": {"name": "x", "namespace": "shop", "labels": labels or {},
                         "annotations": annotations or {},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "web-1",
                                              "controller": True}]}, "spec": spec}


def test_pod_is_patched_in_place_with_label_and_intent() -> None:
    assert pod_patch(_pod(), INTENT, suppressed=False) == {"metadata": {
        "labels": {"compactor.dev/policy": "p"},
        "annotations": {"compactor.dev/intent": INTENT.render()}}}


def test_suppression_and_protection_markers_follow_the_workload_and_pod() -> None:
    done = {"compactor.dev/intent": INTENT.render()}
    patch = pod_patch(_pod({"compactor.dev/policy": "p"}, annotations={
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false", **done}), INTENT, True)
    assert patch == {"metadata": {"labels": {"compactor.dev/suppressed": "true",
                                             "compactor.dev/protected": "true"}}}
    lifted = _pod({"compactor.dev/suppressed": "true", "compactor.dev/policy": "p"}, done)
    assert pod_patch(lifted, INTENT, False) == {"metadata": {"labels": {
        "compactor.dev/suppressed": None}}}


def test_placeholder_priorities_below_minus_ten_are_protected() -> None:
    assert is_protected(_pod(priority=-11))
    assert not is_protected(_pod(priority=-10))
    assert is_protected(_pod(annotations={
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "on-completion"}))


def test_owner_index_walks_replicaset_to_deployment() -> None:
    rs = {"metadata": {"name": "web-1", "namespace": "shop", "ownerReferences": [
        {"kind": "Deployment", "name": "web", "controller": True}]}}
    index = OwnerIndex.build([("ReplicaSet", rs)])
    assert index.chain(_pod()) == [("ReplicaSet", "shop", "web-1"), ("Deployment", "shop", "web")]


def test_condition_transition_time_moves_only_when_status_flips() -> None:
    first = render_conditions([Condition("Valid", True, "Valid", "")], [], 1, now="T1")
    same = render_conditions([Condition("Valid", True, "Valid", "")], first, 2, now="T2")
    flipped = render_conditions([Condition("Valid", False, "InvalidSpec", "x")], same, 3,
                                now="T3")
    assert [c["lastTransitionTime"] for c in (first[0], same[0], flipped[0])] == [
        "T1", "T1", "T3"]
    assert same[0]["observedGeneration"] == 2


def test_scheduler_readiness_depends_on_mode() -> None:
    external = parse_policy({"metadata": {"name": "e"}, "spec": {"scheduler": {
        "useManagedScheduler": False, "externalSchedulerName": "x"}}})
    assert policy_conditions(external, False, True, 1)[1].reason == "External"
    assert policy_conditions(POLICY, False, True, 1)[1].status is False
    assert policy_conditions(POLICY, True, True, 0)[2].reason == "Suspended"
