"""A bad edit never tears a policy down, on the real API server: today's CRD refuses it; one
that got past an older CRD leaves the workloads' labels and intent, the CronJob and the
compaction scheduler as they were, and the policy says why (its status and an Event)."""

from __future__ import annotations

import pytest

from compaction import names
from controller.kubeapi.client import Api
from controller.process.reconciler import Reconciler
from localcluster import ApiError, Cluster, Kube
from localcluster.cluster.kube import path, wait_for
from tests.integration.conftest import Policies
from tests.integration.helpers import HARNESS_PLAN, an_older_crd, deployment


@pytest.mark.asyncio
async def test_a_bad_edit_is_refused_and_one_past_an_older_crd_keeps_everything(
        cluster: Cluster, kube: Kube, namespace: str, workloads: Cluster,
        compaction_policies: Policies, in_process_reconciler: Reconciler) -> None:
    name = compaction_policies.make(namespace)
    kube.create(path("deployments", namespace), deployment("web", 1))
    await in_process_reconciler.reconcile()
    web = path("deployments", namespace, "web")
    intent = kube.get(web)["metadata"]["annotations"][names.INTENT_ANNOTATION]
    cron = path("cronjobs", names.INSTALL_NAMESPACE, names.descheduler_name(name))
    assert kube.find(cron) is not None
    status = kube.get(compaction_policies.path(name))["status"]
    assert status["lastValidGeneration"] == 1 and "scope" in status["lastValidSpec"]

    # Today's CRD refuses the edit outright.
    bad = {"spec": {"descheduler": {"interval": "0 24 * * *"}}}
    with pytest.raises(ApiError) as refused:
        kube.patch(compaction_policies.path(name), bad)
    assert refused.value.status == 422 and "spec.descheduler.interval" in str(refused.value)

    # One that got past an older CRD is acted on as the last valid spec.
    with an_older_crd(kube, "clustercompactionpolicies"):
        kube.patch(compaction_policies.path(name), bad)
    summary = await in_process_reconciler.reconcile()
    assert f"ClusterCompactionPolicy/{name}" in summary.invalid
    meta = kube.get(web)["metadata"]
    assert meta["annotations"][names.INTENT_ANNOTATION] == intent
    assert meta["labels"][names.POLICY_LABEL] == name
    assert kube.find(cron) is not None
    assert kube.get(cron)["spec"]["schedule"] == "*/30 * * * *"  # the last valid one's
    assert kube.find(path("deployments", names.INSTALL_NAMESPACE, "compactor-scheduler"))
    status = kube.get(compaction_policies.path(name))["status"]
    valid = next(c for c in status["conditions"] if c["type"] == "Valid")
    assert valid["status"] == "False"
    assert "acting on the last valid spec (generation 1)" in valid["message"]
    wait_for("the Event", lambda: [e for e in kube.items(path("events", "default"))
                                   if e["reason"] == "InvalidSpecIgnored"
                                   and e["involvedObject"]["name"] == name])
    # The same after a restart: the last valid spec lives in the status, not in memory.
    api = await Api.connect(str(cluster.kubeconfig))
    try:
        await Reconciler(api, HARNESS_PLAN).reconcile()
    finally:
        await api.close()
    assert kube.find(cron) is not None
    assert kube.get(web)["metadata"]["annotations"][names.INTENT_ANNOTATION] == intent
