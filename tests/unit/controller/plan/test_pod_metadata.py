"""Pure decisions of the controller: workload metadata, Pod metadata, ownership, conditions."""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

import pytest

from compaction.intent import intent_for
from compaction.validation import parse_policy
from compaction.workload import WorkloadType
from controller.plan.pod_metadata import OwnerIndex, is_protected, pod_patch, stale_copies
from controller.plan.scheduler_routing import Routing, SchedulerHealth
from controller.plan.status import Condition, policy_conditions, render_conditions
from controller.plan.workload_metadata import desired_policy, workload_patch
from controller.snapshot.constraints import Constraints, Toleration
from controller.snapshot.owner import OwnerInfo, owner_parser
from controller.snapshot.pod import PodInfo, parse_pod
from controller.snapshot.workload import WorkloadInfo, parse_workload

POLICY = parse_policy({"metadata": {"name": "p"}, "spec": {}})
INTENT = intent_for(POLICY, WorkloadType.DEPLOYMENT)
LABELS = {"compactor.dev/policy": "p", "compactor.dev/workload-kind": "Deployment"}


def _deploy(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
            owners: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "shop", "uid": "u",
                         "labels": labels or {}, "annotations": annotations or {},
                         "ownerReferences": owners or []},
            "spec": {"template": {"metadata": {"labels": {"app": "web"}}}}}


def _workload(kind: WorkloadType, obj: dict[str, Any]) -> WorkloadInfo:
    w = parse_workload(kind, obj, {})
    assert w is not None
    return w


def test_unlabelled_workload_gets_label_and_intent_in_metadata_only() -> None:
    w = _workload(WorkloadType.DEPLOYMENT, _deploy())
    assert workload_patch(w, INTENT) == {"metadata": {
        "labels": {"compactor.dev/policy": "p"},
        "annotations": {"compactor.dev/intent": INTENT.render()}}}


def test_converged_workload_needs_no_patch_and_stale_one_is_cleaned() -> None:
    done = _workload(WorkloadType.DEPLOYMENT, _deploy(
        {"compactor.dev/policy": "p"}, {"compactor.dev/intent": INTENT.render()}))
    assert workload_patch(done, INTENT) is None
    assert workload_patch(done, None) == {"metadata": {
        "labels": {"compactor.dev/policy": None}, "annotations": {"compactor.dev/intent": None}}}
    assert workload_patch(_workload(WorkloadType.DEPLOYMENT, _deploy()), None) is None


OWNED_JOBS = [("CronJob", False), ("AnalysisRun", False), ("Workflow", True), (None, True)]


@pytest.mark.parametrize(("owner", "is_one"), OWNED_JOBS,
                         ids=[str(o) for o, _ in OWNED_JOBS])
def test_a_job_is_a_workload_unless_a_cronjob_or_analysisrun_made_it(
        owner: str | None, is_one: bool) -> None:
    refs = [{"kind": owner, "name": "c", "controller": True}] if owner else []
    job = parse_workload(WorkloadType.JOB, _deploy(owners=refs), {})
    assert (job is not None) is is_one
    if job is not None:
        # workloadTypes: [Job] covers it; a CronJob's Job is covered by the CronJob only.
        assert desired_policy([POLICY], job) == POLICY


def test_template_opt_out_is_read_from_the_cronjob_job_template() -> None:
    cron = _deploy()
    cron["spec"] = {"jobTemplate": {"spec": {"template": {"metadata": {"labels": {
        "compactor.dev/ignore": "true"}}}}}}
    assert desired_policy([POLICY], _workload(WorkloadType.CRON_JOB, cron)) is None


def _pod(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
         priority: int | None = None, owner: tuple[str, str] = ("ReplicaSet", "web-1")
         ) -> PodInfo:
    return PodInfo("shop", "x", "u1", labels or {}, annotations or {}, owner,
                   priority=priority)


def test_pod_is_patched_in_place_with_labels_and_intent() -> None:
    assert pod_patch(_pod(), INTENT, suppressed=False) == {"metadata": {
        "labels": LABELS, "annotations": {"compactor.dev/intent": INTENT.render()}}}


def test_suppression_and_protection_markers_follow_the_workload_and_pod() -> None:
    done = {"compactor.dev/intent": INTENT.render()}
    patch = pod_patch(_pod(LABELS, annotations={
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false", **done}), INTENT, True)
    assert patch == {"metadata": {"labels": {"compactor.dev/suppressed": "true",
                                             "compactor.dev/protected": "true"}}}
    lifted = _pod({"compactor.dev/suppressed": "true", **LABELS}, done)
    assert pod_patch(lifted, INTENT, False) == {"metadata": {"labels": {
        "compactor.dev/suppressed": None}}}


def test_a_pod_without_a_policy_loses_every_label_of_ours() -> None:
    assert pod_patch(_pod(LABELS, {"compactor.dev/intent": INTENT.render()}), None, False) == {
        "metadata": {"labels": {"compactor.dev/policy": None,
                                "compactor.dev/workload-kind": None},
                     "annotations": {"compactor.dev/intent": None}}}


@pytest.mark.parametrize("priority", [-10, -11, -2_000_000])
def test_placeholders_at_or_below_minus_ten_are_never_patched(priority: int) -> None:
    assert pod_patch(_pod(priority=priority), INTENT, suppressed=True) is None
    assert pod_patch(_pod(LABELS, priority=priority), None, suppressed=False) is None
    assert pod_patch(_pod(priority=-9), INTENT, suppressed=False) is not None


def test_safe_to_evict_false_or_on_completion_is_protected() -> None:
    for value in ("false", "on-completion"):
        assert is_protected(_pod(annotations={
            "cluster-autoscaler.kubernetes.io/safe-to-evict": value}))
    assert not is_protected(_pod(annotations={
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}))
    assert not is_protected(_pod(priority=-10))  # a placeholder is simply never labelled


def test_karpenters_do_not_disrupt_is_protected() -> None:
    assert is_protected(_pod(annotations={"karpenter.sh/do-not-disrupt": "true"}))
    assert not is_protected(_pod(annotations={"karpenter.sh/do-not-disrupt": "false"}))


@pytest.mark.parametrize(("toleration", "protected"), [
    (Toleration(operator="Exists"), True),  # tolerates every taint
    (Toleration("compactor.dev/drain", "Exists"), True),
    (Toleration("compactor.dev/drain", "Equal", "p", "PreferNoSchedule"), True),
    (Toleration("compactor.dev/drain", "Exists", effect="NoSchedule"), False),
    (Toleration("node.kubernetes.io/not-ready", "Exists", effect="NoExecute"), False),
])
def test_a_pod_tolerating_the_drain_taint_is_protected(toleration: Toleration,
                                                       protected: bool) -> None:
    # RemovePodsViolatingNodeTaints never evicts it: the label says so to the rendered
    # selector too, and its node is never drained.
    pod = replace(_pod(), constraints=Constraints(tolerations=(toleration,)))
    assert is_protected(pod) is protected


UP = SchedulerHealth(Routing.AVAILABLE)
DOWN = SchedulerHealth(Routing.UNAVAILABLE)
MINUTE = datetime.timedelta(minutes=1)

RS = OwnerInfo("ReplicaSet", "shop", "web-1", ("Deployment", "web"), {})


def test_owner_index_walks_replicaset_to_its_deployment_workload() -> None:
    index = OwnerIndex.build([RS])
    assert index.chain(_pod()) == [("ReplicaSet", "shop", "web-1"), ("Deployment", "shop", "web")]
    assert index.workload(_pod()) == ("Deployment", "shop", "web")
    orphan = OwnerIndex.build([])
    assert orphan.workload(_pod()) is None  # a ReplicaSet is never a workload itself


def test_cronjob_job_pods_belong_to_the_cronjob() -> None:
    job = owner_parser("Job")({"metadata": {
        "name": "nightly-1", "namespace": "shop",
        "ownerReferences": [{"kind": "CronJob", "name": "nightly", "controller": True}]}})
    pod = _pod(owner=("Job", "nightly-1"))
    assert OwnerIndex.build([job]).workload(pod) == ("CronJob", "shop", "nightly")
    assert OwnerIndex.build([]).workload(pod) == ("Job", "shop", "nightly-1")


def test_a_pod_is_read_into_what_the_decisions_need() -> None:
    pod = parse_pod({
        "metadata": {"namespace": "shop", "name": "web-1", "uid": "u1",
                     "labels": {"app": "web"}, "creationTimestamp": "2026-12-01T12:00:00Z",
                     "deletionTimestamp": "2026-12-01T12:05:00Z", "managedFields": [{}],
                     "ownerReferences": [{"kind": "ReplicaSet", "name": "web-abc",
                                          "controller": True},
                                         {"kind": "Other", "name": "x"}]},
        "spec": {"nodeName": "n1", "priority": -10, "priorityClassName": "low",
                 "volumes": [{"name": "d", "emptyDir": {}},
                             {"name": "c", "persistentVolumeClaim": {"claimName": "x"}}],
                 "containers": [{"name": "app", "env": [{"name": "SECRET", "value": "x"}]}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    assert (pod.owner, pod.node_name, pod.scheduler_name) == (
        ("ReplicaSet", "web-abc"), "n1", "default-scheduler")
    assert (pod.priority, pod.priority_class_name, pod.phase, pod.ready) == (
        -10, "low", "Running", True)
    assert pod.deleting and pod.local_storage and pod.pvc and pod.created is not None
    assert not hasattr(pod, "__dict__"), "a slotted record: a cache of them stays small"


STALE = [
    ("copy-matches", {"compactor.dev/intent": "A"}, {"compactor.dev/intent": "A"}, []),
    ("workload-dropped-it", {"compactor.dev/intent": "A"}, {}, ["compactor.dev/intent"]),
    ("workload-changed-it", {"compactor.dev/intent": "A"}, {"compactor.dev/intent": "B"},
     ["compactor.dev/intent"]),
    ("state-copy", {"compactor.dev/convergence": "{}", "other": "x"}, {"other": "y"},
     ["compactor.dev/convergence"]),
    ("nothing-of-ours", {"deployment.kubernetes.io/revision": "3"}, {}, []),
]


@pytest.mark.parametrize(("copy", "workload", "removed"), [c[1:] for c in STALE],
                         ids=[c[0] for c in STALE])
def test_stale_copies_on_a_replicaset_are_removed_only_if_still_stale(
        copy: dict[str, str], workload: dict[str, str], removed: list[str]) -> None:
    ops = stale_copies(copy, workload)
    assert [op["op"] for op in ops] == ["test", "remove"] * len(removed)
    paths = ["/metadata/annotations/" + k.replace("/", "~1") for k in removed]
    assert [op["path"] for op in ops if op["op"] == "remove"] == paths
    assert [op["value"] for op in ops if op["op"] == "test"] == [copy[k] for k in removed]


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
    assert policy_conditions(external, DOWN, MINUTE, 3, 1)[1].reason == "External"
    assert policy_conditions(POLICY, DOWN, MINUTE, 3, 1)[1].status is False


def test_descheduler_readiness_says_why_it_cannot_run() -> None:
    assert policy_conditions(POLICY, UP, MINUTE, None, 1)[2].reason == "Progressing"
    assert policy_conditions(POLICY, UP, MINUTE, 3, 0)[2].reason == "Suspended"
    no_pool = policy_conditions(POLICY, UP, MINUTE, 0, 4)[2]
    assert (no_pool.status, no_pool.reason) == (False, "NoMatchingNodes")
    assert "spec.descheduler.nodeSelector" in no_pool.message
    assert policy_conditions(POLICY, UP, MINUTE, 3, 4)[2].reason == "Scheduled"
