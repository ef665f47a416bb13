"""Resource policies against the real API server, the webhook process and the pass: the CRDs'
refusals, a plan composed from two policies and admitted as written, a LimitRange the plan
would break (neither rejected nor applied, before and after the controller knows of it), a
``maxLimitRequestRatio`` per container and per Pod judged as the API server judges it, and
a compaction policy applying beside a resource policy."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from compaction import names
from compaction.resource_plan import parse_resource_plan
from controller.process.reconciler import Reconciler
from localcluster import ApiError, Kube
from localcluster.cluster.kube import path, wait_for
from tests.integration.conftest import POLICY_API, Policies
from tests.integration.helpers import (
    owner_ref,
    pod_template,
    pods_of,
)

CLUSTER_STATIC = path("clusterstaticpolicies", api=POLICY_API)


def _static(ns: str) -> str:
    return path("staticpolicies", ns, api=POLICY_API)


def _body(kind: str, name: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "compactor.dev/v1alpha1", "kind": kind, "metadata": {"name": name},
            "spec": {"containers": containers, **spec}}


@pytest.mark.parametrize(("containers", "spec", "says"), [
    ([{"name": "app", "requests": {"cpu": "lots"}}], {}, "should match"),
    ([{"name": "app", "requests": {"cpu": "-1"}}], {}, "should match"),
    ([{"name": "app", "requests": {"cpu": "1"}}, {"name": "app", "limits": {"cpu": "1"}}], {},
     "Duplicate value"),
    ([{"name": "app"}], {}, "sets neither requests nor limits"),
    ([{"name": "*", "requests": {"cpu": "1"}}],
     {"scope": {"namespaceSelector": {"operator": "In", "values": ["b"]}}},
     "spec.scope.namespaceSelector may not be set on a StaticPolicy"),
], ids=["bad-quantity", "negative", "duplicate-container", "empty", "namespaced-selector"])
def test_the_static_policy_crds_refuse_what_the_api_server_would(
        kube: Kube, namespace: str, compactor_crds: None, containers: list[dict[str, Any]],
        spec: dict[str, Any], says: str) -> None:
    with pytest.raises(ApiError) as e:
        kube.create(_static(namespace), _body("StaticPolicy", "p", containers, **spec),
                    dry_run=True)
    assert e.value.status == 422 and says in e.value.message, e.value.message


def test_integer_and_string_quantities_are_both_accepted(kube: Kube, compactor_crds: None
                                                         ) -> None:
    body = _body("ClusterStaticPolicy", f"s-{uuid.uuid4().hex[:6]}", [
        {"name": "*", "requests": {"nvidia.com/gpu": 1, "cpu": "250m"},
         "limits": {"nvidia.com/gpu": "1"}}])
    assert kube.create(CLUSTER_STATIC, body, dry_run=True)["spec"]["containers"][0][
        "requests"]["nvidia.com/gpu"] == 1


@pytest.fixture
def cluster_static(kube: Kube, compactor_crds: None) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for name in made:
        kube.delete(path("clusterstaticpolicies", name=name, api=POLICY_API))


def _two_containers(name: str) -> dict[str, Any]:
    template = pod_template({"app": name})
    app = template["spec"]["containers"][0]
    app["resources"] = {"requests": {"cpu": "100m", "memory": "64Mi"},
                        "limits": {"cpu": "2", "memory": "1Gi"}}
    template["spec"]["containers"].append({"name": "log", "image": app["image"]})
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": template}}


def _resources(pod: dict[str, Any]) -> dict[str, Any]:
    return {c["name"]: c.get("resources") or {} for c in pod["spec"]["containers"]}


def _probe(kube: Kube, ns: str, owner: dict[str, Any], template: dict[str, Any]
           ) -> dict[str, Any]:
    """What admission makes of a new Pod of ``owner`` (a dry run: nothing is created)."""
    return kube.create(path("pods", ns), {
        "metadata": {"generateName": "probe-", "ownerReferences": [owner_ref(owner)]},
        "spec": template["spec"]}, dry_run=True)


def _replica_set(kube: Kube, ns: str) -> dict[str, Any]:
    (rs,) = kube.items(path("replicasets", ns))
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", **rs}


@pytest.mark.asyncio
async def test_a_plan_from_two_policies_is_admitted_as_written_beside_the_compaction_intent(
        kube: Kube, hooked_ns: str, compaction_policies: Policies, cluster_static: list[str],
        in_process_reconciler: Reconciler) -> None:
    ns = hooked_ns
    pack = compaction_policies.make(ns)
    wide = f"s-{uuid.uuid4().hex[:6]}"
    kube.create(CLUSTER_STATIC, _body("ClusterStaticPolicy", wide, [
        {"name": "*", "requests": {"cpu": "250m"}}],
        scope={"namespaceSelector": {"operator": "In", "values": [ns]}}))
    cluster_static.append(wide)
    kube.create(_static(ns), _body("StaticPolicy", "team", [
        {"name": "app", "requests": {"memory": "128Mi"}, "limits": {"memory": "256Mi"}}]))
    deployment = _two_containers("web")
    kube.create(path("deployments", ns), deployment)
    pods_of(kube, ns, "app=web", 1)
    await in_process_reconciler.reconcile()

    web = kube.get(path("deployments", ns, "web"))
    annotations = web["metadata"]["annotations"]
    assert names.INTENT_ANNOTATION in annotations  # compaction and resources never compete
    parsed = parse_resource_plan(annotations[names.RESOURCES_ANNOTATION])
    assert parsed.plan is not None
    rs = _replica_set(kube, ns)
    expected = {"app": {"requests": {"cpu": "250m", "memory": "128Mi"},
                        "limits": {"cpu": "2", "memory": "256Mi"}},
                "log": {"requests": {"cpu": "250m"}}}
    wait_for("admission to apply the plan", lambda: _resources(
        _probe(kube, ns, rs, deployment["spec"]["template"])) == expected, timeout=20)
    before = {p["metadata"]["uid"] for p in kube.items(path("pods", ns), "app=web")}
    kube.patch(path("deployments", ns, "web"), {"spec": {"replicas": 2}})
    (new,) = [p for p in pods_of(kube, ns, "app=web", 2) if p["metadata"]["uid"] not in before]
    assert _resources(new) == expected  # the API server took it as the plan says
    assert new["metadata"]["annotations"][names.RESOURCES_HASH_ANNOTATION] == parsed.plan.hash
    assert new["metadata"]["labels"][names.POLICY_LABEL] == pack
    assert new["spec"]["schedulerName"] == "compactor-scheduler"

    # A changed policy changes the plan within one pass; status counts the Pods behind it.
    kube.patch(_static(ns) + "/team", {"spec": {"containers": [
        {"name": "app", "requests": {"memory": "192Mi"}, "limits": {"memory": "256Mi"}}]}})
    await in_process_reconciler.reconcile()
    changed = parse_resource_plan(kube.get(path("deployments", ns, "web"))["metadata"][
        "annotations"][names.RESOURCES_ANNOTATION])
    assert changed.plan is not None and changed.plan.containers["app"].requests["memory"] == \
        "192Mi"
    await in_process_reconciler.reconcile()
    status = kube.get(_static(ns) + "/team")["status"]
    assert status["workloads"] == 1 and status["blockedWorkloads"] == 0
    # Every running Pod predates the changed plan (the new one waits for its scheduler).
    running = [p for p in kube.items(path("pods", ns), "app=web")
               if p["status"].get("phase") == "Running"]
    assert running and status["podsDiffering"] == len(running)


async def _applied(kube: Kube, ns: str, reconciler: Reconciler, deployment: dict[str, Any],
                   requested: tuple[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Deployment created and one pass run: its plan is on it, and new Pods of its
    ReplicaSet are admitted with ``requested`` (resource, value) for container ``app``.
    The ReplicaSet and the template, for later probes."""
    kube.create(path("deployments", ns), deployment)
    name = deployment["metadata"]["name"]
    pods_of(kube, ns, f"app={name}", 1)
    await reconciler.reconcile()
    assert names.RESOURCES_ANNOTATION in kube.get(path("deployments", ns, name))[
        "metadata"]["annotations"]
    rs = _replica_set(kube, ns)
    template = deployment["spec"]["template"]
    resource, value = requested
    wait_for("the plan applied", lambda: _resources(_probe(kube, ns, rs, template))[
        "app"]["requests"][resource] == value, timeout=20)
    return rs, template


def _blocked(kube: Kube, ns: str, policy: str) -> str:
    """The workload ``web`` lost its plan, the policy says ResourcesBlocked: the Event's text."""
    web = kube.get(path("deployments", ns, "web"))
    assert names.RESOURCES_ANNOTATION not in (web["metadata"].get("annotations") or {})
    (event,) = [e for e in kube.items(path("events", ns))
                if e["reason"] == "ResourcesBlocked" and e["involvedObject"]["name"] == "web"]
    conditions = {c["type"]: c for c in kube.get(_static(ns) + f"/{policy}")["status"][
        "conditions"]}
    assert conditions["ResourcesBlocked"]["status"] == "True"
    return str(event["message"])


@pytest.mark.asyncio
async def test_a_limit_range_the_plan_would_break_is_neither_rejected_nor_applied(
        kube: Kube, hooked_ns: str, compactor_crds: None,
        in_process_reconciler: Reconciler) -> None:
    ns = hooked_ns
    kube.create(_static(ns), _body("StaticPolicy", "big", [
        {"name": "app", "requests": {"memory": "32Mi"}}]))
    rs, template = await _applied(kube, ns, in_process_reconciler, _two_containers("web"),
                                  ("memory", "32Mi"))

    # A LimitRange appears that the plan would break: before the controller has seen it,
    # the webhook no longer applies the plan (the LimitRanges differ from those checked)...
    # (The template asks 64Mi, within the minimum; the plan's 32Mi is not.)
    kube.create(path("limitranges", ns), {"metadata": {"name": "caps"}, "spec": {"limits": [
        {"type": "Container", "min": {"memory": "48Mi"}}]}})
    wait_for("admission to leave the plan out", lambda: _resources(
        _probe(kube, ns, rs, template))["app"]["requests"]["memory"] == "64Mi", timeout=20)
    # ...then the controller blocks it: no plan on the workload, an Event, the condition.
    await in_process_reconciler.reconcile()
    message = _blocked(kube, ns, "big")
    assert "container app: memory request" in message
    assert "below minimum" in message and "LimitRange caps" in message
    # New Pods are admitted, as they were asked for.
    before = {p["metadata"]["uid"] for p in kube.items(path("pods", ns), "app=web")}
    kube.patch(path("deployments", ns, "web"), {"spec": {"replicas": 2}})
    (new,) = [p for p in pods_of(kube, ns, "app=web", 2) if p["metadata"]["uid"] not in before]
    assert _resources(new)["app"]["requests"]["memory"] == "64Mi"


def _ratio_deployment(name: str, log: dict[str, Any]) -> dict[str, Any]:
    """``app`` at a CPU limit/request of 2; ``log`` with the resources given."""
    template = pod_template({"app": name})
    app = template["spec"]["containers"][0]
    app["resources"] = {"requests": {"cpu": "250m"}, "limits": {"cpu": "500m"}}
    template["spec"]["containers"].append({"name": "log", "image": app["image"],
                                           "resources": log})
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": template}}


@pytest.mark.parametrize(("kind", "log"), [
    ("Container", {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}),
    # A container without CPU adds nothing to the Pod's sums: the Pod is at 250m/500m.
    ("Pod", {}),
], ids=["container", "pod"])
@pytest.mark.asyncio
async def test_a_limit_request_ratio_the_plan_keeps_applies_and_one_it_breaks_blocks_it(
        kube: Kube, hooked_ns: str, compactor_crds: None, in_process_reconciler: Reconciler,
        kind: str, log: dict[str, Any]) -> None:
    ns = hooked_ns
    kube.create(path("limitranges", ns), {"metadata": {"name": "ratio"}, "spec": {"limits": [
        {"type": kind, "maxLimitRequestRatio": {"cpu": "4"}}]}})
    # 500m/125m is 4, at the ratio: kept, and the API server admits the Pod.
    kube.create(_static(ns), _body("StaticPolicy", "ratio", [
        {"name": "app", "requests": {"cpu": "125m"}}]))
    rs, template = await _applied(kube, ns, in_process_reconciler,
                                  _ratio_deployment("web", log), ("cpu", "125m"))

    # 500m/100m is 5: the API server refuses such a Pod (a bare one: the webhook skips it)...
    broken = copy.deepcopy(template["spec"])
    broken["containers"][0]["resources"]["requests"]["cpu"] = "100m"
    with pytest.raises(ApiError) as refused:
        kube.create(path("pods", ns), {"metadata": {"generateName": "bare-"}, "spec": broken},
                    dry_run=True)
    assert "max limit to request ratio" in refused.value.message, refused.value.message
    # ...so the controller blocks a plan asking for it: no plan, an Event, the condition.
    kube.patch(_static(ns) + "/ratio", {"spec": {"containers": [
        {"name": "app", "requests": {"cpu": "100m"}}]}})
    await in_process_reconciler.reconcile()
    message = _blocked(kube, ns, "ratio")
    assert f"cpu limit/request 5 above 4 (LimitRange ratio, type {kind})" in message
    # New Pods are admitted as they were asked for.
    wait_for("admission to leave the blocked plan out", lambda: _resources(_probe(
        kube, ns, rs, template))["app"]["requests"]["cpu"] == "250m", timeout=20)
