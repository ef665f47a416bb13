"""The workload is the only authority for intent: against the real API server, the real
Deployment and Job controllers (which copy and create), the webhook process and the pass.

The Deployment controller copies a Deployment's annotations onto its ReplicaSets and never
removes one the Deployment dropped; a CronJob's Job carries no intent of its own. Neither copy
nor absence may decide what a new Pod gets.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from compaction.intent import parse_intent
from controller.process.reconciler import Reconciler
from localcluster import Kube
from localcluster.cluster.kube import path, wait_for
from tests.integration.conftest import Policies
from tests.integration.helpers import (
    deployment,
    pod_template,
    pods_of,
)

INTENT = "compactor.dev/intent"
POLICY_LABEL = "compactor.dev/policy"


def _owner_ref(obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
            "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}


def _admitted(kube: Kube, ns: str, owner: dict[str, Any]) -> dict[str, Any]:
    """What admission makes of a new Pod of ``owner`` now (a dry run: nothing is created)."""
    body = {"metadata": {"generateName": "probe-", "ownerReferences": [_owner_ref(owner)]},
            **{"spec": pod_template({"app": "probe"})["spec"]}}
    return kube.create(path("pods", ns), body, dry_run=True)


def _state(pod: dict[str, Any]) -> tuple[str | None, str | None, str]:
    meta = pod["metadata"]
    return ((meta.get("labels") or {}).get(POLICY_LABEL),
            (meta.get("annotations") or {}).get(INTENT), pod["spec"].get("schedulerName", ""))


def _replica_set(kube: Kube, ns: str) -> dict[str, Any]:
    (rs,) = kube.items(path("replicasets", ns))
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", **rs}


CHANGES: dict[str, Callable[[Kube, Policies, str, str], object]] = {
    "policy-deleted": lambda kube, p, ns, name: p.delete(name),
    "policy-disabled": lambda kube, p, ns, name: kube.patch(
        p.path(name), {"spec": {"enabled": False}}),
    "policy-rescoped": lambda kube, p, ns, name: kube.patch(p.path(name), {"spec": {
        "scope": {"namespaceSelector": {"operator": "In", "values": ["elsewhere"]}}}}),
    "workload-opted-out": lambda kube, p, ns, name: kube.patch(
        path("deployments", ns, "web"), {"metadata": {"labels": {"compactor.dev/ignore": "true"}}}),
    "lower-weight-takes-over": lambda kube, p, ns, name: p.delete(name),
}


@pytest.mark.parametrize("change", list(CHANGES))
@pytest.mark.asyncio
async def test_new_pods_follow_the_workload_never_a_stale_replicaset_copy(
        change: str, kube: Kube, hooked_ns: str, compaction_policies: Policies,
        in_process_reconciler: Reconciler) -> None:
    ns, policies = hooked_ns, compaction_policies
    winner = policies.make(ns, {"weight": 10})
    runner_up = None
    if change == "lower-weight-takes-over":
        runner_up = policies.make(ns, {"weight": 0, "scheduler": {
            "useManagedScheduler": False, "externalSchedulerName": "other-scheduler"}})
    kube.create(path("deployments", ns), deployment("web", 1))
    pods_of(kube, ns, "app=web", 1)
    await in_process_reconciler.reconcile()
    stale = kube.get(path("deployments", ns, "web"))["metadata"]["annotations"][INTENT]
    wait_for("the Deployment controller to copy the intent onto the ReplicaSet", lambda: (
        _replica_set(kube, ns)["metadata"].get("annotations") or {}).get(INTENT) == stale)
    before = {p["metadata"]["uid"] for p in kube.items(path("pods", ns), "app=web")}

    CHANGES[change](kube, policies, ns, winner)
    await in_process_reconciler.reconcile()

    workload = kube.get(path("deployments", ns, "web"))
    truth = (workload["metadata"].get("annotations") or {}).get(INTENT)
    if runner_up is None:
        assert truth is None
        expected: tuple[str | None, str | None, str] = (None, None, "default-scheduler")
    else:
        parsed = parse_intent(truth or "")
        assert parsed.intent is not None and parsed.intent.policy == runner_up
        expected = (runner_up, truth, "other-scheduler")
    # kubectl shows the truth on the ReplicaSet too: no stale copy is left there.
    copy = (_replica_set(kube, ns)["metadata"].get("annotations") or {}).get(INTENT)
    assert copy in (None, truth), f"stale intent left on the ReplicaSet: {copy}"

    rs = _replica_set(kube, ns)
    wait_for(f"admission to follow the Deployment after {change}",
             lambda: _state(_admitted(kube, ns, rs)) == expected, timeout=20)
    kube.patch(path("deployments", ns, "web"), {"spec": {"replicas": 4}})
    new = [p for p in pods_of(kube, ns, "app=web", 4) if p["metadata"]["uid"] not in before]
    assert len(new) == 3
    assert {_state(p) for p in new} == {expected}


def _cronjob(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": {
                "template": {**pod_template({"app": name}), "spec": {
                    **pod_template({"app": name})["spec"], "restartPolicy": "Never"}}}}}}


@pytest.mark.asyncio
async def test_cronjob_pods_keep_the_cronjobs_intent_over_several_passes(
        kube: Kube, hooked_ns: str, compaction_policies: Policies,
        in_process_reconciler: Reconciler) -> None:
    ns = hooked_ns
    name = compaction_policies.make(ns)
    cron = kube.create(path("cronjobs", ns), _cronjob("nightly"))
    await in_process_reconciler.reconcile()
    cron = kube.get(path("cronjobs", ns, "nightly"))
    intent = cron["metadata"]["annotations"][INTENT]
    # As `kubectl create job --from=cronjob/nightly` makes it: owned by the CronJob, created
    # suspended here so that its Pod is admitted only once the webhook knows the intent.
    job_spec = {**cron["spec"]["jobTemplate"]["spec"], "suspend": True}
    job = kube.create(path("jobs", ns), {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"nightly-manual-{uuid.uuid4().hex[:5]}",
                     "ownerReferences": [_owner_ref(cron)]}, "spec": job_spec})
    wait_for("admission to give the Job's Pods the CronJob's intent",
             lambda: _state(_admitted(kube, ns, job)) == (name, intent, "compactor-scheduler"))
    kube.patch(path("jobs", ns, job["metadata"]["name"]), {"spec": {"suspend": False}})
    (pod,) = pods_of(kube, ns, "app=nightly", 1)
    assert _state(pod) == (name, intent, "compactor-scheduler")

    for _ in range(3):
        summary = await in_process_reconciler.reconcile()
        assert not summary.errors
    pod = kube.get(path("pods", ns, pod["metadata"]["name"]))
    assert _state(pod) == (name, intent, "compactor-scheduler")
    # The Job is a step of the chain, not a workload: it carries no intent of its own.
    job = kube.get(path("jobs", ns, job["metadata"]["name"]))
    assert INTENT not in (job["metadata"].get("annotations") or {})
