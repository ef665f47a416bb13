"""A pass's decisions as table tests: a snapshot in, the actions out (``plan`` is pure)."""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

import pytest

from compaction.intent import intent_for
from compaction.validation import parse_policy
from compaction.workload import WorkloadType
from controller.components.pod_settings import RuntimeSettings
from controller.plan.actions import (
    Apply,
    Delete,
    Evict,
    Patch,
    Plan,
    RecordEvent,
    Target,
    WriteStatus,
)
from controller.plan.between_passes import Memory
from controller.plan.convergence import ConvergenceState
from controller.plan.decide import drain_plans, plan
from controller.plan.own_objects import digest
from controller.plan.settings import PlanSettings
from controller.snapshot.constraints import Constraints
from controller.snapshot.node import NodeInfo
from controller.snapshot.owned import OwnedInfo
from controller.snapshot.owner import OwnerInfo
from controller.snapshot.pdb import parse_pdb
from controller.snapshot.pod import PodInfo
from controller.snapshot.policies import parse_policy_info
from controller.snapshot.snapshot import Snapshot
from controller.snapshot.workload import WorkloadInfo, parse_workload

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
SETTINGS = PlanSettings(RuntimeSettings())
DEPLOY_PATH = "/apis/apps/v1/namespaces/shop/deployments/web"


def _policy(name: str = "p", **spec: Any) -> Any:
    return parse_policy_info({
        "apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
        "metadata": {"name": name, "uid": f"uid-{name}", "generation": 1,
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"scope": {"namespaceSelector": {"operator": "In", "values": ["shop"]}},
                 **spec}})


INTENT = intent_for(parse_policy({"metadata": {"name": "p"}, "spec": {}}),
                    WorkloadType.DEPLOYMENT)
LABELLED = {"compactor.dev/policy": "p"}
ANNOTATED = {"compactor.dev/intent": INTENT.render()}


def _deploy(labels: dict[str, str] | None = None,
            annotations: dict[str, str] | None = None) -> WorkloadInfo:
    w = parse_workload(WorkloadType.DEPLOYMENT, {
        "metadata": {"namespace": "shop", "name": "web", "uid": "w1", "labels": labels or {},
                     "annotations": annotations or {}}, "spec": {"replicas": 1}}, {})
    assert w is not None
    return w


RS = OwnerInfo("ReplicaSet", "shop", "web-1", ("Deployment", "web"), {})
POD = PodInfo("shop", "web-1-a", "u1", owner=("ReplicaSet", "web-1"), node_name="n1",
              phase="Running", ready=True)
DONE_POD = PodInfo("shop", "web-1-a", "u1", dict(INTENT.labels), dict(ANNOTATED),
                   ("ReplicaSet", "web-1"), node_name="n1", phase="Running", ready=True)
NODES = (NodeInfo("n1", {"pool": "a"}),)


def _snapshot(**parts: Any) -> Snapshot:
    defaults: dict[str, Any] = {"nodes": NODES, "owners": (RS,), "cluster_version": "v1.36.3"}
    return Snapshot(**{**defaults, **parts})


def _patches(p: Plan, target: Target) -> list[Patch]:
    return [a for a in p.of(Patch) if a.target is target]


def test_a_new_policy_labels_the_workload_with_an_event_and_its_pods_in_place() -> None:
    p = plan(_snapshot(policies=(_policy(),), workloads=(_deploy(),), pods=(POD,)), SETTINGS,
             NOW)
    (workload,) = _patches(p, Target.WORKLOAD)
    assert workload.path == DEPLOY_PATH and workload.body == {"metadata": {
        "labels": LABELLED, "annotations": ANNOTATED}}
    (event,) = workload.then
    assert isinstance(event, RecordEvent) and event.body["reason"] == "CompactionPolicyChanged"
    assert event.body["involvedObject"]["apiVersion"] == "apps/v1"
    (pod,) = _patches(p, Target.POD)
    assert pod.path == "/api/v1/namespaces/shop/pods/web-1-a"
    assert pod.body["metadata"]["labels"] == {"compactor.dev/policy": "p",
                                              "compactor.dev/workload-kind": "Deployment"}
    assert p.managed == {"p": 1}
    (status,) = p.of(WriteStatus)
    assert status.status["managedWorkloads"] == 1


def test_a_converged_cluster_plans_no_patch() -> None:
    p = plan(_snapshot(policies=(_policy(),), workloads=(_deploy(LABELLED, ANNOTATED),),
                       pods=(DONE_POD,)), SETTINGS, NOW)
    assert p.of(Patch) == []


def test_no_policy_any_more_strips_workload_pods_and_the_replicasets_copy() -> None:
    stale_rs = OwnerInfo("ReplicaSet", "shop", "web-1", ("Deployment", "web"), ANNOTATED)
    p = plan(_snapshot(workloads=(_deploy(LABELLED, ANNOTATED),), owners=(stale_rs,),
                       pods=(DONE_POD,)), SETTINGS, NOW)
    (workload,) = _patches(p, Target.WORKLOAD)
    assert workload.body == {"metadata": {"labels": {"compactor.dev/policy": None},
                                          "annotations": {"compactor.dev/intent": None}}}
    (event,) = workload.then
    assert isinstance(event, RecordEvent)
    assert "no compaction policy applies any more" in event.body["message"]
    (copy,) = _patches(p, Target.STALE_COPY)
    assert copy.patch_type == "json" and 422 in copy.tolerate
    assert copy.body == [
        {"op": "test", "path": "/metadata/annotations/compactor.dev~1intent",
         "value": INTENT.render()},
        {"op": "remove", "path": "/metadata/annotations/compactor.dev~1intent"}]
    (pod,) = _patches(p, Target.POD)
    assert pod.body["metadata"]["labels"] == {"compactor.dev/policy": None,
                                              "compactor.dev/workload-kind": None}


def test_a_replicasets_fresh_copy_is_left_alone() -> None:
    rs = OwnerInfo("ReplicaSet", "shop", "web-1", ("Deployment", "web"), ANNOTATED)
    p = plan(_snapshot(policies=(_policy(),), workloads=(_deploy(LABELLED, ANNOTATED),),
                       owners=(rs,)), SETTINGS, NOW)
    assert _patches(p, Target.STALE_COPY) == []


def _own(kind: str, name: str, revision: str = "g1", component: str = "scheduler",
         policy: str | None = None, available: int = 0) -> OwnedInfo:
    labels = {"app.kubernetes.io/managed-by": "compactor",
              "app.kubernetes.io/component": component}
    if policy:
        labels["compactor.dev/policy"] = policy
    return OwnedInfo(kind, name, labels, revision, available)


SCHEDULER = (_own("ConfigMap", "compactor-scheduler-config", "r5"),
             _own("Deployment", "compactor-scheduler", "g2", available=1))


@pytest.mark.parametrize(("own", "deleted"), [
    ((), []),
    (SCHEDULER, ["/api/v1/namespaces/compactor-system/configmaps/compactor-scheduler-config",
                 "/apis/apps/v1/namespaces/compactor-system/deployments/compactor-scheduler"]),
], ids=["already-gone", "present"])
def test_without_a_managed_scheduler_policy_its_objects_are_deleted_once(
        own: tuple[OwnedInfo, ...], deleted: list[str]) -> None:
    p = plan(_snapshot(own=own), SETTINGS, NOW)
    assert [a.path for a in p.of(Delete)] == deleted
    assert p.of(Apply) == []


def test_the_scheduler_stays_while_an_unbound_pod_names_it_and_goes_after_with_an_event(
        ) -> None:
    # No policy needs the scheduler any more (deleted, disabled, switched to another mode),
    # but a Pod still waits for it: its schedulerName can never change, so only the
    # compaction scheduler can ever bind it.
    waiting = PodInfo("shop", "web-1-b", "u2", owner=("ReplicaSet", "web-1"),
                      scheduler_name="compactor-scheduler", phase="Pending")
    kept = plan(_snapshot(own=SCHEDULER, pods=(waiting,)), SETTINGS, NOW)
    assert kept.of(Delete) == []
    assert {a.path for a in kept.of(Apply)} == {
        "/api/v1/namespaces/compactor-system/configmaps/compactor-scheduler-config",
        "/apis/apps/v1/namespaces/compactor-system/deployments/compactor-scheduler"}
    (event,) = kept.of(RecordEvent)
    assert event.body["reason"] == "CompactionSchedulerKept" and "1 unbound" in \
        event.body["message"]
    # Once it is bound (or gone), the scheduler goes, and says so.
    bound = replace(waiting, node_name="n1", phase="Running")
    gone = plan(_snapshot(own=SCHEDULER, pods=(bound,)), SETTINGS, NOW)
    assert len(gone.of(Delete)) == 2
    assert [e.body["reason"] for e in gone.of(RecordEvent)] == ["CompactionSchedulerRemoved"]
    # A Pod bound for another scheduler, or already deleting, keeps nothing.
    other = replace(waiting, scheduler_name="default-scheduler")
    assert len(plan(_snapshot(own=SCHEDULER, pods=(other,)), SETTINGS, NOW).of(Delete)) == 2


def _applied(p: Plan) -> dict[str, str]:
    return {a.path: a.digest for a in p.of(Apply)}


def test_own_objects_are_applied_until_the_same_body_was_applied_and_left_unchanged() -> None:
    policies = (_policy(),)
    first = plan(_snapshot(policies=policies), SETTINGS, NOW)
    applied = _applied(first)
    assert len(applied) == 4  # scheduler ConfigMap + Deployment, descheduler ConfigMap + CronJob
    own = (*SCHEDULER, _own("ConfigMap", "compactor-descheduler-p", "r7", "descheduler", "p"),
           _own("CronJob", "compactor-descheduler-p", "g1", "descheduler", "p"))
    revisions = {"compactor-scheduler-config": "r5", "compactor-scheduler": "g2",
                 "compactor-descheduler-p": None}
    memory = Memory()
    for path, d in applied.items():
        name = path.rsplit("/", 1)[1]
        rev = revisions[name] or ("r7" if "/configmaps/" in path else "g1")
        memory = memory.wrote(path, d, rev)
    again = plan(_snapshot(policies=policies, own=own), SETTINGS, NOW, memory)
    assert again.of(Apply) == []
    # Someone edited the CronJob (its generation moved): it is applied again, alone.
    edited = tuple(o if o.kind != "CronJob" else _own("CronJob", o.name, "g2", "descheduler",
                                                         "p") for o in own)
    assert [a.path for a in plan(_snapshot(policies=policies, own=edited), SETTINGS, NOW,
                                 memory).of(Apply)] == [
        "/apis/batch/v1/namespaces/compactor-system/cronjobs/compactor-descheduler-p"]


def test_scheduler_readiness_comes_from_the_deployment_read() -> None:
    ready = plan(_snapshot(policies=(_policy(),), own=SCHEDULER), SETTINGS, NOW)
    (status,) = ready.of(WriteStatus)
    conditions = {c["type"]: c for c in status.status["conditions"]}
    assert conditions["SchedulerReady"]["reason"] == "Available"


def test_a_removed_policys_descheduler_objects_are_deleted() -> None:
    own = (_own("CronJob", "compactor-descheduler-gone", "g1", "descheduler", "gone"),
           _own("ConfigMap", "compactor-descheduler-gone", "r1", "descheduler", "gone"))
    p = plan(_snapshot(own=own), SETTINGS, NOW)
    assert sorted(a.path for a in p.of(Delete)) == [
        "/api/v1/namespaces/compactor-system/configmaps/compactor-descheduler-gone",
        "/apis/batch/v1/namespaces/compactor-system/cronjobs/compactor-descheduler-gone"]


@pytest.mark.parametrize(("nodes", "workloads", "suspended", "reason"), [
    (NODES, (), True, "Suspended"),
    (NODES, (_deploy(),), False, "Scheduled"),
    ((NodeInfo("n1", {"pool": "b"}),), (_deploy(),), True, "NoMatchingNodes"),
], ids=["no-workloads", "running", "empty-pool"])
def test_the_descheduler_cronjob_runs_only_when_it_has_work_and_nodes(
        nodes: tuple[NodeInfo, ...], workloads: tuple[WorkloadInfo, ...], suspended: bool,
        reason: str) -> None:
    policy = _policy(descheduler={"nodeSelector": {"matchExpressions": [
        {"key": "pool", "operator": "In", "values": ["a*"]}]}})
    p = plan(_snapshot(policies=(policy,), nodes=nodes, workloads=workloads), SETTINGS, NOW)
    (cron,) = [a for a in p.of(Apply) if a.body["kind"] == "CronJob"]
    assert cron.body["spec"]["suspend"] is suspended
    (status,) = p.of(WriteStatus)
    assert status.status["conditions"][2]["reason"] == reason


def test_an_invalid_policy_gets_its_problems_in_status_and_no_objects() -> None:
    bad = _policy("bad", descheduler={"interval": "61 * * * *"})
    p = plan(_snapshot(policies=(bad,)), SETTINGS, NOW)
    assert "ClusterCompactionPolicy/bad" in p.invalid and p.of(Apply) == []
    (status,) = p.of(WriteStatus)
    valid = status.status["conditions"][0]
    assert (valid["type"], valid["status"]) == ("Valid", "False")
    assert "spec.descheduler.interval" in valid["message"]


def test_an_unchanged_status_is_not_written_again() -> None:
    first = plan(_snapshot(policies=(_policy(),)), SETTINGS, NOW)
    (status,) = first.of(WriteStatus)
    stored = replace(_policy(), status=status.status)
    later = NOW + datetime.timedelta(minutes=5)
    assert plan(_snapshot(policies=(stored,)), SETTINGS, later).of(WriteStatus) == []


def test_cronjob_job_pods_get_the_cronjobs_intent() -> None:
    cron = parse_workload(WorkloadType.CRON_JOB, {"metadata": {
        "namespace": "shop", "name": "nightly", "uid": "c1"}, "spec": {}}, {})
    assert cron is not None
    job = OwnerInfo("Job", "shop", "nightly-1", ("CronJob", "nightly"), {})
    pod = PodInfo("shop", "nightly-1-x", "u9", owner=("Job", "nightly-1"), phase="Running")
    p = plan(_snapshot(policies=(_policy(),), workloads=(cron,), owners=(job,), pods=(pod,)),
             SETTINGS, NOW)
    (patch,) = _patches(p, Target.POD)
    assert patch.body["metadata"]["labels"]["compactor.dev/workload-kind"] == "CronJob"


def test_digest_depends_on_the_body_only() -> None:
    assert digest({"a": 1, "b": [1, 2]}) == digest({"b": [1, 2], "a": 1})
    assert digest({"a": 1}) != digest({"a": 2})


def _on(name: str, node: str, compliant: bool, cpu: int = 200) -> PodInfo:
    labels, annotations = (dict(INTENT.labels), dict(ANNOTATED)) if compliant else ({}, {})
    return PodInfo("shop", name, f"u-{name}", labels, annotations, ("ReplicaSet", "web-1"),
                   node_name=node, phase="Running", ready=True,
                   scheduler_name="compactor-scheduler",
                   requests={"cpu": cpu, "memory": 64 * 2**20 * 1000})


def _taint_patches(p: Plan) -> list[Patch]:
    return [a for a in p.of(Patch) if a.path.startswith("/api/v1/nodes/")]


def test_no_new_drain_starts_while_the_runtime_hook_still_re_admits_pods() -> None:
    """The hook's replacements and a drain's evictees would contend for the same room."""
    allocatable = {"cpu": 4000, "memory": 16 * 2**30 * 1000, "pods": 110_000}
    nodes = (NodeInfo("dense", {}, allocatable), NodeInfo("sparse", {}, allocatable))
    policy = _policy(setLabelsByEviction=True)
    settled = (_on("d1", "dense", True, 2000), _on("s1", "sparse", True))
    workloads = (_deploy(LABELLED, ANNOTATED),)
    go = plan(_snapshot(nodes=nodes, policies=(policy,), workloads=workloads, pods=settled),
              SETTINGS, NOW)
    assert go.drains[0].draining == ("sparse",) and len(_taint_patches(go)) == 1
    # x1's replacement goes to "dense", the most allocated node: the hook replaces it.
    busy = (*settled, _on("x1", "sparse", False))
    busy_snapshot = _snapshot(nodes=nodes, policies=(policy,), workloads=workloads, pods=busy)
    held = plan(busy_snapshot, SETTINGS, NOW)
    assert held.drains[0].freeable == ("sparse",)  # still shown as freeable...
    assert held.drains[0].draining == () and _taint_patches(held) == []  # ...not started
    # The preview plays the hook out first: x1 on "dense", then the drain of "sparse".
    (after,) = drain_plans(busy_snapshot, SETTINGS, NOW)
    assert after.draining == ("sparse",) and after.moves == {
        ("shop", "x1"): "dense", ("shop", "s1"): "dense"}


def test_a_pod_whose_replacement_would_come_back_is_left_alone_and_holds_no_drain() -> None:
    """x1 stands on "dense", which the compaction scheduler would choose for its replacement
    too: replacing it would spend an eviction to land where it is."""
    allocatable = {"cpu": 4000, "memory": 16 * 2**30 * 1000, "pods": 110_000}
    nodes = (NodeInfo("dense", {}, allocatable), NodeInfo("sparse", {}, allocatable))
    policy = _policy(setLabelsByEviction=True)
    pods = (_on("d1", "dense", True, 2000), _on("s1", "sparse", True),
            _on("x1", "dense", False))
    p = plan(_snapshot(nodes=nodes, policies=(policy,), workloads=(_deploy(LABELLED, ANNOTATED),),
                       pods=pods), SETTINGS, NOW)
    assert p.of(Evict) == []
    assert p.drains[0].draining == ("sparse",) and len(_taint_patches(p)) == 1


def test_a_pod_its_budget_keeps_from_the_runtime_hook_does_not_hold_the_drains() -> None:
    """A Pod placed before the policy behind a PDB with maxUnavailable: 0: the hook's eviction
    is refused for ever, so waiting for its replacement would start no drain ever again."""
    allocatable = {"cpu": 4000, "memory": 16 * 2**30 * 1000, "pods": 110_000}
    nodes = (NodeInfo("dense", {}, allocatable), NodeInfo("sparse", {"pool": "b"}, allocatable))
    policy = _policy(setLabelsByEviction=True)
    settled = (_on("d1", "dense", True, 2000), _on("s1", "sparse", True))
    # Its replacement may go to "sparse" only (its node lost the label it selects since).
    guarded = replace(_on("x1", "dense", False), labels={"app": "payments"},
                      constraints=Constraints(node_selector={"pool": "b"}))
    budget = parse_pdb({"metadata": {"namespace": "shop", "name": "payments"},
                        "spec": {"selector": {"matchLabels": {"app": "payments"}}},
                        "status": {"disruptionsAllowed": 0}})
    workloads = (_deploy(LABELLED, ANNOTATED),)
    go = plan(_snapshot(nodes=nodes, policies=(policy,), workloads=workloads,
                        pods=(*settled, guarded), pdbs=(budget,)), SETTINGS, NOW)
    assert go.drains[0].draining == ("sparse",) and len(_taint_patches(go)) == 1
    # Allowed, it is still left alone: "dense" stays in use whatever moves, so its eviction
    # would free nothing, and it holds no drain.
    allowed = replace(budget, disruptions_allowed=1)
    kept = plan(_snapshot(nodes=nodes, policies=(policy,), workloads=workloads,
                          pods=(*settled, guarded), pdbs=(allowed,)), SETTINGS, NOW)
    assert kept.of(Evict) == []
    assert kept.drains[0].draining == ("sparse",) and len(_taint_patches(kept)) == 1


def test_the_hook_replacing_pods_of_a_node_the_plan_frees_holds_the_drains() -> None:
    """x1 stands on "sparse", which the plan frees: the hook replaces it, and no drain starts
    meanwhile (its replacement and the drain's evictees would contend for "dense")."""
    allocatable = {"cpu": 4000, "memory": 16 * 2**30 * 1000, "pods": 110_000}
    nodes = (NodeInfo("dense", {}, allocatable), NodeInfo("sparse", {}, allocatable))
    policy = _policy(setLabelsByEviction=True)
    old = NOW - datetime.timedelta(hours=1)
    pods = tuple(replace(p, created=old) for p in (
        _on("d1", "dense", True, 2000), _on("s1", "sparse", True), _on("x1", "sparse", False)))
    settled = ConvergenceState(intent_hash=INTENT.hash,
                               intent_since=NOW - datetime.timedelta(minutes=10)).render()
    workload = _deploy(LABELLED, {**ANNOTATED, "compactor.dev/convergence": settled})
    p = plan(_snapshot(nodes=nodes, policies=(policy,), workloads=(workload,), pods=pods),
             SETTINGS, NOW)
    assert [e.name for e in p.of(Evict)] == ["x1"]
    assert p.drains[0].freeable == ("sparse",)
    assert p.drains[0].draining == () and _taint_patches(p) == []
