"""No Pod is stranded on a compaction scheduler that is not there, with every part real: the
webhook and controller processes, the scheduler process started from the controller's
ConfigMap, the default kube-scheduler and kwok.

kwok only pretends to run the scheduler Deployment's Pod, so an outage is made as a cluster
would see one: the scheduler process is killed, and its Deployment's Pod is marked not Ready
(as an image that cannot be pulled leaves it). The controller then has no available replica
to count on; it must send new Pods to the default scheduler, replace those left Pending on
the missing one, and send Pods to it again once it is back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from compaction import names
from localcluster import Cluster, Kube
from localcluster.chaos.stranding import Stranding
from localcluster.cluster.control_plane import NodeShape
from localcluster.cluster.kube import path, wait_for
from localcluster.cluster.process import Process
from localcluster.cluster.stack import SCHEDULER_DOWN_AFTER, CompactorStack, stranded_bound

NS = "shop"
POLICY = "outage"
GRACE = 3.0  # the controller's intent grace here
BOUND = stranded_bound(GRACE)


@pytest.fixture(scope="module")
def stack(e2e_cluster: Cluster, e2e_kube: Kube,
          tmp_path_factory: pytest.TempPathFactory) -> CompactorStack:
    s = CompactorStack(e2e_cluster, e2e_kube, tmp_path_factory.mktemp("stack"))
    s.install()
    s.start_webhook(cache_ttl=1.0)
    s.start_controller(grace_seconds=GRACE)
    return s


def _routing(kube: Kube) -> str:
    status = kube.get(path(names.POLICY_PLURAL, name=POLICY,
                           api=f"apis/{names.API_VERSION}")).get("status") or {}
    return next((c["reason"] for c in status.get("conditions") or []
                 if c["type"] == "SchedulerReady"), "")


def _pods(kube: Kube) -> list[dict[str, Any]]:
    return [p for p in kube.items(path("pods", NS), "app=web")
            if not p["metadata"].get("deletionTimestamp")]


def _running(kube: Kube, count: int) -> list[dict[str, Any]] | None:
    pods = _pods(kube)
    ready = [p for p in pods if p["status"].get("phase") == "Running"]
    return ready if len(ready) == count and len(pods) == count else None


@pytest.fixture(scope="module")
def scheduler(stack: CompactorStack, e2e_cluster: Cluster, e2e_kube: Kube
              ) -> Iterator[list[Process]]:
    kube = e2e_kube
    e2e_cluster.add_nodes(kube, ["outage-0", "outage-1"], NodeShape())
    kube.ensure_namespace(NS, default_service_account=True)
    kube.apply(path(names.POLICY_PLURAL, name=POLICY, api=f"apis/{names.API_VERSION}"), {
        "apiVersion": names.API_VERSION, "kind": names.POLICY_KIND,
        "metadata": {"name": POLICY},
        "spec": {"scope": {"namespaceSelector": {"operator": "In", "values": [NS]}},
                 "descheduler": {"enabled": False}}})
    running = [stack.start_scheduler()]
    yield running
    for proc in running:
        proc.stop()


def test_no_pod_is_stranded_on_a_scheduler_that_is_not_there(
        stack: CompactorStack, e2e_kube: Kube, e2e_cluster: Cluster,
        scheduler: list[Process]) -> None:
    kube = e2e_kube
    wait_for("the scheduler routed to", lambda: _routing(kube) == "Available", timeout=60)
    kube.create(path("deployments", NS), {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                     "terminationGracePeriodSeconds": 0, "containers": [{
                         "name": "c", "image": "registry.k8s.io/pause:3.10",
                         "resources": {"requests": {"cpu": "100m"}}}]}}}})
    # Its Pods are admitted by the intent the controller writes on it: wait for that first.
    wait_for("the intent on web", lambda: names.INTENT_ANNOTATION in (kube.get(path(
        "deployments", NS, "web"))["metadata"].get("annotations") or {}), timeout=30)
    kube.patch(path("deployments", NS, "web"), {"spec": {"replicas": 2}})
    with Stranding(kube, [NS]) as stranding:
        before = wait_for("web on the compaction scheduler", lambda: _running(kube, 2),
                          timeout=60)
        assert {p["spec"]["schedulerName"] for p in before} == {names.MANAGED_SCHEDULER}

        # The outage: the process is killed and its Pod can no longer run.
        proc = scheduler.pop()
        proc.stop()
        e2e_cluster.processes.remove(proc)
        stack.scheduler_pods_unready(True)
        # A Pod created before the controller notices goes to the missing scheduler.
        kube.patch(path("deployments", NS, "web"), {"spec": {"replicas": 3}})
        wait_for("the fallback", lambda: _routing(kube) == "Unavailable",
                 timeout=SCHEDULER_DOWN_AFTER + 30)
        # New Pods now go to the default scheduler and run within the bound...
        kube.patch(path("deployments", NS, "web"), {"spec": {"replicas": 5}})
        # ...and the Pod left Pending on the missing scheduler is replaced.
        during = wait_for("web Running without the compaction scheduler",
                          lambda: _running(kube, 5), timeout=BOUND + 10, interval=0.5)
        assert {p["spec"]["schedulerName"] for p in during} == {
            names.MANAGED_SCHEDULER, names.DEFAULT_SCHEDULER}
        assert all(p["metadata"]["labels"].get(names.POLICY_LABEL) == POLICY for p in during)
        replaced = [e for e in kube.items(path("events", NS))
                    if e["reason"] == "StrandedPodReplaced"]
        assert replaced, "the Pod left Pending on the missing scheduler was not replaced"
        assert stack.controller_metric("compactor_stranded_pods_replaced_total") >= 1
        assert stack.controller_metric("compactor_scheduler_routing",
                                       state="Unavailable") == 1

        # It returns: once available for a while, new Pods go to it again.
        stack.scheduler_pods_unready(False)
        scheduler.append(stack.start_scheduler())
        wait_for("routed again", lambda: _routing(kube) == "Available", timeout=60)
        kube.patch(path("deployments", NS, "web"), {"spec": {"replicas": 7}})
        after = wait_for("web Running", lambda: _running(kube, 7), timeout=60)
        newest = sorted(after, key=lambda p: p["metadata"]["creationTimestamp"])[-2:]
        assert {p["spec"]["schedulerName"] for p in newest} == {names.MANAGED_SCHEDULER}
    # Never a Pod left waiting on the missing scheduler past the bound.
    assert stranding.first_seen, "no Pod ever waited on the missing scheduler: no outage"
    print(stranding.summary(BOUND))
    assert stranding.over(BOUND) == {}, stranding.longest
