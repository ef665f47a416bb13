"""deploy/ applied with kubectl's own kustomize to the real API server, and what each
component's ServiceAccount may and may not do (kubectl auth can-i)."""

from __future__ import annotations

import base64
import json
import os
import re
import ssl
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from compaction.intent import parse_intent
from localcluster import ApiError, Cluster, Kube
from localcluster.cluster.kube import path, wait_for
from localcluster.cluster.process import Process, free_port
from localcluster.cluster.stack import service_account_token, token_kubeconfig
from tests.integration.helpers import ROOT, deployment, running_pods
from tests.unit.webhook_fakes import pod, review
from webhook.review import OwnerRef

DEPLOY = ROOT / "deploy"
# What is applied: deploy/ with the webhook pointed at a closed loopback port (see there).
INSTALL = Path(__file__).parent / "deploy-overlay"


def kubectl(cluster: Cluster, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([str(cluster.bin / "kubectl"), f"--kubeconfig={cluster.kubeconfig}",
                          *args], capture_output=True, text=True, timeout=120, check=False)
    if check and out.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
    return out


@pytest.fixture(scope="module")
def rendered(cluster: Cluster) -> list[dict[str, Any]]:
    out = kubectl(cluster, "kustomize", str(DEPLOY))
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.fixture(scope="module")
def installed(cluster: Cluster, kube: Kube, workloads: Cluster) -> Iterator[None]:
    # A server-side dry run cannot create the namespace its namespaced objects go into, so
    # the namespace goes first (a real apply orders it first by itself).
    kubectl(cluster, "apply", "--server-side", "-f", str(DEPLOY / "namespace.yaml"))
    dry = kubectl(cluster, "apply", "--server-side", "--dry-run=server", "-k", str(DEPLOY))
    assert "serverside-applied (server dry run)" in dry.stdout
    assert kube.find(path("mutatingwebhookconfigurations", name="compactor-webhook")) is None
    kubectl(cluster, "apply", "--server-side", "-k", str(INSTALL))
    mwc = kube.get(path("mutatingwebhookconfigurations", name="compactor-webhook"))
    assert mwc["webhooks"][0]["clientConfig"]["url"].startswith("https://127.0.0.1:")
    # The real webhook configuration points at a Service with no real endpoints in this
    # cluster; keep it only as long as this module needs it, so other tests stay fast.
    try:
        yield
    finally:
        kube.delete(path("mutatingwebhookconfigurations", name="compactor-webhook"))


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc.get("spec", {})
    template = spec.get("template") or spec.get("jobTemplate", {}).get("spec", {}).get(
        "template") or {}
    pod = template.get("spec", {})
    return [*pod.get("initContainers", []), *pod.get("containers", [])]


def test_manifests_pin_images_request_resources_and_lock_down_containers(
        rendered: list[dict[str, Any]]) -> None:
    workloads = [d for d in rendered if d["kind"] in ("Deployment", "DaemonSet", "StatefulSet")]
    assert {d["metadata"]["name"] for d in workloads} == {"compactor-webhook",
                                                          "compactor-controller"}
    for doc in workloads:
        for c in _containers(doc):
            image = c["image"]
            assert ":" in image and not image.endswith(":latest"), image
            assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
            sc = c["securityContext"]
            assert sc["runAsNonRoot"] is True and sc["readOnlyRootFilesystem"] is True
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
            assert sc["capabilities"]["drop"] == ["ALL"]
    text = yaml.safe_dump_all(rendered)
    assert ":latest" not in text


def test_webhook_configuration_is_safe_by_construction(rendered: list[dict[str, Any]]) -> None:
    (mwc,) = [d for d in rendered if d["kind"] == "MutatingWebhookConfiguration"]
    (hook,) = mwc["webhooks"]
    assert hook["failurePolicy"] == "Ignore" and hook["sideEffects"] == "None"
    assert hook["reinvocationPolicy"] == "IfNeeded" and hook["timeoutSeconds"] <= 5
    assert hook["rules"] == [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                              "resources": ["pods"], "scope": "Namespaced"}]
    excluded = hook["namespaceSelector"]["matchExpressions"][0]
    assert set(excluded["values"]) == {"kube-system", "compactor-system"}
    assert "config.mirror" in hook["matchConditions"][0]["expression"]


def test_install_creates_everything_and_the_deployments_roll_out(
        installed: None, kube: Kube) -> None:
    for url in (path("customresourcedefinitions", name="clustercompactionpolicies.compactor.dev"),
                path("deployments", "compactor-system", "compactor-webhook"),
                path("deployments", "compactor-system", "compactor-controller"),
                path("poddisruptionbudgets", "compactor-system", "compactor-webhook"),
                path("services", "compactor-system", "compactor-webhook"),
                path("serviceaccounts", "compactor-system", "compactor-descheduler"),
                "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/"
                "compactor-controller-pod-metadata-only",
                "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/"
                "compactor-controller-node-drain-taint-only"):
        assert kube.find(url) is not None, url
    # kwok runs the Pods (their images are never pulled here).
    for name in ("compactor-webhook", "compactor-controller"):
        def available(n: str = name) -> bool:
            status = kube.get(path("deployments", "compactor-system", n))["status"]
            return bool(status.get("availableReplicas") == 2)
        wait_for(f"{name} available", available)


CAN = [
    # component, verb, resource, namespace (None: cluster-wide)
    ("webhook", "get", "replicasets.apps", "shop"),
    ("webhook", "watch", "cronjobs.batch", None),
    ("webhook", "get", "namespaces", None),
    ("controller", "patch", "deployments.apps", "shop"),
    ("controller", "patch", "pods", "shop"),
    ("controller", "create", "pods:eviction", "shop"),
    ("controller", "patch", "clustercompactionpolicies.compactor.dev:status", None),
    ("controller", "watch", "compactionpolicies.compactor.dev", None),
    ("controller", "patch", "compactionpolicies.compactor.dev:status", "shop"),
    ("controller", "create", "policyevaluations.compactor.dev", None),
    ("controller", "patch", "policyevaluations.compactor.dev:status", None),
    ("controller", "create", "cronjobs.batch", "compactor-system"),
    ("controller", "create", "configmaps", "compactor-system"),
    ("controller", "update", "secrets", "compactor-system"),
    ("controller", "patch", "mutatingwebhookconfigurations/compactor-webhook", None),
    ("controller", "patch", "nodes", None),
    ("controller", "list", "poddisruptionbudgets.policy", None),
    ("scheduler", "create", "bindings", "shop"),
    ("scheduler", "update", "leases.coordination.k8s.io/compactor-scheduler",
     "compactor-system"),
    ("descheduler", "create", "pods:eviction", "shop"),
    ("descheduler", "list", "poddisruptionbudgets.policy", None),
]
CANNOT = [
    ("webhook", "get", "secrets", None), ("webhook", "patch", "pods", "shop"),
    ("webhook", "create", "pods", "shop"), ("webhook", "delete", "pods", "shop"),
    # It reads owners from their own watches, never Pods: a Pod's env stays with the API server.
    ("webhook", "list", "pods", None), ("webhook", "watch", "pods", None),
    ("webhook", "get", "pods", "shop"), ("webhook", "list", "secrets", None),
    ("controller", "get", "secrets", None), ("controller", "get", "secrets", "shop"),
    ("controller", "list", "secrets", "shop"), ("controller", "list", "secrets", None),
    ("controller", "watch", "secrets", None), ("controller", "list", "secrets",
                                                "compactor-system"),
    ("controller", "delete", "pods", "shop"), ("controller", "deletecollection", "pods", "shop"),
    ("controller", "patch", "mutatingwebhookconfigurations/someone-else", None),
    ("controller", "create", "mutatingwebhookconfigurations", None),
    ("controller", "create", "cronjobs.batch", "shop"),
    ("controller", "update", "deployments.apps", "shop"),
    ("controller", "patch", "nodes:status", None), ("controller", "delete", "nodes", None),
    ("scheduler", "get", "secrets", "shop"),
    ("scheduler", "update", "leases.coordination.k8s.io/compactor-controller",
     "compactor-system"),
    ("controller", "create", "clustercompactionpolicies.compactor.dev", None),
    ("controller", "create", "compactionpolicies.compactor.dev", "shop"),
    # The singleton is created when absent and never overwritten: an admin's edit stays.
    ("controller", "update", "policyevaluations.compactor.dev", None),
    ("controller", "patch", "policyevaluations.compactor.dev", None),
    ("descheduler", "delete", "pods", "shop"), ("descheduler", "patch", "pods", "shop"),
    ("descheduler", "get", "secrets", None),
    ("descheduler", "patch", "mutatingwebhookconfigurations/compactor-webhook", None),
]


def _can_i(cluster: Cluster, component: str, verb: str, resource: str,
           namespace: str | None) -> bool:
    # "resource/name" asks about one object, "resource:sub" about a subresource.
    resource, _, sub = resource.partition(":")
    args = ["auth", "can-i", verb, resource, *([f"--subresource={sub}"] if sub else []),
            f"--as=system:serviceaccount:compactor-system:compactor-{component}"]
    args += ["-n", namespace] if namespace else ["--all-namespaces"]
    out = kubectl(cluster, *args, check=False)
    assert out.stdout.strip() in ("yes", "no"), out.stderr
    return out.stdout.strip() == "yes"


@pytest.mark.parametrize("case", CAN, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CAN])
def test_each_component_can_do_what_it_needs(installed: None, cluster: Cluster,
                                             case: tuple[str, str, str, str | None]) -> None:
    assert _can_i(cluster, *case)


@pytest.mark.parametrize("case", CANNOT, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CANNOT])
def test_each_component_cannot_do_what_it_must_not(installed: None, cluster: Cluster,
                                                   case: tuple[str, str, str, str | None]
                                                   ) -> None:
    assert not _can_i(cluster, *case)


def test_the_controller_account_may_patch_pod_metadata_but_never_pod_spec(
        installed: None, kube: Kube, namespace: str) -> None:
    kube.create(path("deployments", namespace), deployment("victim", 1))
    (pod,) = wait_for("running", lambda: running_pods(kube, namespace, "app=victim", 1))
    url = path("pods", namespace, pod["metadata"]["name"])
    as_controller = {"Impersonate-User":
                     "system:serviceaccount:compactor-system:compactor-controller"}
    kube.request("PATCH", url, {"metadata": {"labels": {"compactor.dev/policy": "p"}}},
                 "application/merge-patch+json", headers=as_controller)
    # activeDeadlineSeconds is one of the few mutable spec fields: only the policy stops it.
    wait_for("policy active", lambda: _spec_patch_denied(
        kube, url, as_controller, {"activeDeadlineSeconds": 3600}, {"activeDeadlineSeconds": None}))
    assert "activeDeadlineSeconds" not in kube.get(url)["spec"]
    # Its ReplicaSet likewise: metadata (stale annotation copies) yes, spec no.
    (rs,) = kube.items(path("replicasets", namespace))
    rs_url = path("replicasets", namespace, rs["metadata"]["name"])
    kube.request("PATCH", rs_url, {"metadata": {"annotations": {"compactor.dev/intent": None}}},
                 "application/merge-patch+json", headers=as_controller)
    assert _spec_patch_denied(kube, rs_url, as_controller, {"replicas": 2}, {"replicas": 1})
    assert kube.get(rs_url)["spec"]["replicas"] == 1


def _status_with_token(cluster: Cluster, token: str, method: str, url: str,
                       body: dict[str, Any] | None = None) -> int:
    """What the API server answers a component's own ServiceAccount token, no impersonation
    (a PATCH's body is a JSON merge patch)."""
    tls = ssl.create_default_context(cafile=str(cluster.pki / "ca.crt"))
    kind = "application/merge-patch+json" if method == "PATCH" else "application/json"
    with httpx.Client(base_url=cluster.server, verify=tls,
                      headers={"Authorization": f"Bearer {token}"}, timeout=10) as client:
        return client.request(method, url, headers={"Content-Type": kind}, content=None
                              if body is None else json.dumps(body)).status_code


def test_the_accounts_real_tokens_are_refused_pods_secrets_and_deletion(
        installed: None, cluster: Cluster, kube: Kube, namespace: str) -> None:
    """The same refusals as the can-i tables, made by the accounts' own tokens: the webhook
    lists no Pod anywhere, the controller reads no Secret outside its namespace and deletes
    no Pod; each next to a request the same token may make, so a refusal is the role's."""
    kube.create(path("deployments", namespace), deployment("kept", 1))
    (pod,) = wait_for("running", lambda: running_pods(kube, namespace, "app=kept", 1))
    kube.create(path("secrets", namespace), {"metadata": {"name": "app-secret"},
                                             "stringData": {"password": "x"}})
    webhook = service_account_token(kube, "compactor-system", "compactor-webhook")
    controller = service_account_token(kube, "compactor-system", "compactor-controller")
    pod_url = path("pods", namespace, pod["metadata"]["name"])
    cases = [
        (webhook, "GET", path("replicasets", namespace), 200),
        (webhook, "GET", path("pods"), 403),
        (webhook, "GET", path("pods", namespace), 403),
        (webhook, "GET", pod_url, 403),
        (webhook, "GET", path("secrets", namespace, "app-secret"), 403),
        (controller, "GET", path("secrets", "compactor-system", "absent-but-allowed"), 404),
        (controller, "GET", path("secrets", namespace, "app-secret"), 403),
        (controller, "GET", path("secrets", namespace), 403),
        (controller, "GET", path("secrets"), 403),
        (controller, "GET", pod_url, 200),
        (controller, "DELETE", pod_url, 403),
        (controller, "DELETE", path("pods", namespace), 403),
    ]
    got = [(method, url, _status_with_token(cluster, token, method, url))
           for token, method, url, _ in cases]
    assert [status for _, _, status in got] == [want for *_, want in cases], got
    assert kube.get(pod_url)["metadata"]["uid"] == pod["metadata"]["uid"]


def test_the_controller_token_may_change_its_own_webhook_configuration_and_no_other(
        installed: None, cluster: Cluster, kube: Kube) -> None:
    """Its ClusterRole reaches mutating webhook configurations by resourceNames (its own), which
    the policy scan cannot see (CKV_K8S_155 is skipped on that ground): with the controller's
    own token, changing another configuration is refused, beside the same change to its own."""
    other = f"someone-else-{uuid.uuid4().hex[:6]}"
    validating_api = "apis/admissionregistration.k8s.io/v1"
    # No webhooks in them: they admit nothing while they exist.
    mutating = kube.create(path("mutatingwebhookconfigurations"), {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": other}, "webhooks": []})
    kube.create(path("validatingwebhookconfigurations", api=validating_api), {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration", "metadata": {"name": other}, "webhooks": []})
    own = path("mutatingwebhookconfigurations", name="compactor-webhook")
    theirs = path("mutatingwebhookconfigurations", name=other)
    token = service_account_token(kube, "compactor-system", "compactor-controller")
    touch = {"metadata": {"labels": {"compactor.test/touched": "yes"}}}
    replaced = {**mutating, "metadata": {**mutating["metadata"], **touch["metadata"]}}
    cases = [
        ("PATCH", own, touch, 200),
        ("PATCH", theirs, touch, 403),
        ("PUT", theirs, replaced, 403),
        ("DELETE", theirs, None, 403),
        ("GET", theirs, None, 403),
        ("POST", path("mutatingwebhookconfigurations"),
         {**mutating, "metadata": {"name": f"{other}-new"}}, 403),
        ("PATCH", path("validatingwebhookconfigurations", name=other, api=validating_api),
         touch, 403),
    ]
    try:
        got = [(method, url, _status_with_token(cluster, token, method, url, body))
               for method, url, body, _ in cases]
        assert [status for *_, status in got] == [want for *_, want in cases], got
        assert "labels" not in kube.get(theirs)["metadata"]
    finally:
        kube.patch(own, {"metadata": {"labels": {"compactor.test/touched": None}}})
        kube.delete(theirs)
        kube.delete(path("validatingwebhookconfigurations", name=other, api=validating_api))


def test_the_controller_account_may_set_its_drain_taint_on_a_node_and_nothing_else(
        installed: None, cluster: Cluster, kube: Kube) -> None:
    node = f"vap-{uuid.uuid4().hex[:5]}"
    cluster.add_nodes(kube, [node], labels={"compactor.test/vap": "yes"}, wait=False)
    url = path("nodes", name=node)
    as_controller = {"Impersonate-User":
                     "system:serviceaccount:compactor-system:compactor-controller"}
    drain = {"key": "compactor.dev/drain", "value": "p", "effect": "PreferNoSchedule"}

    def patch(body: dict[str, Any]) -> ApiError | None:
        try:
            kube.request("PATCH", url, body, "application/merge-patch+json",
                         headers=as_controller)
        except ApiError as e:
            return e
        return None

    def refused(body: dict[str, Any]) -> bool:
        error = patch(body)
        return error is not None and error.status in (403, 422) and \
            "compactor" in error.message
    # The policy takes effect asynchronously: wait until a foreign taint is refused.
    wait_for("the node policy active", lambda: refused(
        {"spec": {"taints": [{"key": "other", "effect": "NoSchedule"}]}}) or (
        kube.patch(url, {"spec": {"taints": None}}) and False))
    assert patch({"spec": {"taints": [drain]}}) is None
    assert (kube.get(url)["spec"]["taints"][0]["key"]) == "compactor.dev/drain"
    assert patch({"spec": {"taints": None}}) is None
    assert refused({"spec": {"taints": [{**drain, "effect": "NoSchedule"}]}})
    assert refused({"spec": {"unschedulable": True}})
    assert refused({"metadata": {"labels": {"compactor.test/vap": "no"}}})
    kube.delete(url)


def _spec_patch_denied(kube: Kube, url: str, headers: dict[str, str], change: dict[str, Any],
                       undo: dict[str, Any]) -> bool:
    try:
        kube.request("PATCH", url, {"spec": change}, "application/merge-patch+json",
                     headers=headers)
    except ApiError as e:
        return e.status in (403, 422) and "metadata of Pods and ReplicaSets only" in e.message
    kube.request("PATCH", url, {"spec": undo}, "application/merge-patch+json")  # undo, retry
    return False


def test_uninstall_removes_it(installed: None, cluster: Cluster, kube: Kube) -> None:
    out = kubectl(cluster, "delete", "--dry-run=server", "-k", str(INSTALL))
    assert "deleted (server dry run)" in out.stdout
    # kubectl names each object it deleted as <kind>.<group> "<name>" [from <ns> namespace];
    # every object of the install is among them, and nothing else.
    deleted = re.findall(r'^(\S+) "([^"]+)" deleted(?: from (\S+) namespace)? '
                         r'\(server dry run\)$', out.stdout, re.M)
    docs = [d for d in yaml.safe_load_all(kubectl(cluster, "kustomize", str(INSTALL)).stdout)
            if d]
    installed_objects = [(".".join(filter(None, (d["kind"].lower(),
                                                  d["apiVersion"].rpartition("/")[0]))),
                          d["metadata"]["name"], d["metadata"].get("namespace", ""))
                         for d in docs]
    assert ("namespace", "compactor-system", "") in installed_objects
    assert sorted(deleted) == sorted(installed_objects), out.stdout


def test_installed_accounts_are_enough_for_the_real_processes(
        installed: None, cluster: Cluster, kube: Kube, namespace: str, tmp_path: Path) -> None:
    """The controller and webhook processes run locally (instead of in the Deployments'
    containers) with the installed ServiceAccounts: the controller issues the webhook's
    certificate, injects the bundle, labels a workload and creates its CronJob; the webhook
    starts on that certificate (its Service names checked) and mutates a Pod."""
    kc = token_kubeconfig(cluster, service_account_token(
        kube, "compactor-system", "compactor-controller"), tmp_path / "controller.kc")
    env = {**os.environ, "COMPACTOR_CONTROLLER_KUBECONFIG": str(kc),
           "COMPACTOR_CONTROLLER_METRICS_PORT": "0", "POD_NAME": "deploy-test"}
    controller = Process("controller-as-installed", [sys.executable, "-m", "controller"],
                         tmp_path / "controller.log", env=env)
    controller.start()
    cluster.processes.append(controller)
    webhook: Process | None = None
    policy = f"inst-{namespace[-6:]}"
    try:
        secret = wait_for("the TLS Secret", lambda: kube.get(
            path("secrets", "compactor-system", "compactor-webhook-tls")), timeout=60)
        bundle = base64.b64decode(secret["data"]["ca-bundle.crt"])
        wait_for("the bundle injected", lambda: base64.b64decode(kube.get(path(
            "mutatingwebhookconfigurations", name="compactor-webhook"))["webhooks"][0][
            "clientConfig"].get("caBundle", "")) == bundle)
        kube.create(path("clustercompactionpolicies", api="apis/compactor.dev/v1alpha1"), {
            "apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
            "metadata": {"name": policy},
            "spec": {"scope": {"namespaceSelector": {"operator": "In", "values": [namespace]}}}})
        kube.create(path("deployments", namespace), deployment("served", 1))
        deploy = wait_for("the Deployment labelled", lambda: (lambda d: d if (
            d["metadata"].get("labels") or {}).get("compactor.dev/policy") == policy else None)(
            kube.get(path("deployments", namespace, "served"))), timeout=60)
        wait_for("its CronJob", lambda: kube.get(path(
            "cronjobs", "compactor-system", f"compactor-descheduler-{policy}")), timeout=60)

        (tmp_path / "tls.crt").write_bytes(base64.b64decode(secret["data"]["tls.crt"]))
        (tmp_path / "tls.key").write_bytes(base64.b64decode(secret["data"]["tls.key"]))
        wkc = token_kubeconfig(cluster, service_account_token(
            kube, "compactor-system", "compactor-webhook"), tmp_path / "webhook.kc")
        port = free_port()
        webhook = Process("webhook-as-installed", [sys.executable, "-m", "webhook"],
                          tmp_path / "webhook.log", env={
                              **os.environ, "COMPACTOR_WEBHOOK_HOST": "127.0.0.1",
                              "COMPACTOR_WEBHOOK_PORT": str(port),
                              "COMPACTOR_WEBHOOK_CERT_FILE": str(tmp_path / "tls.crt"),
                              "COMPACTOR_WEBHOOK_KEY_FILE": str(tmp_path / "tls.key"),
                              "COMPACTOR_WEBHOOK_KUBECONFIG": str(wkc),
                              "COMPACTOR_WEBHOOK_SERVICE_NAME": "compactor-webhook",
                              "COMPACTOR_WEBHOOK_SERVICE_NAMESPACE": "compactor-system"})
        webhook.start()
        cluster.processes.append(webhook)
        ca = tmp_path / "bundle.crt"
        ca.write_bytes(bundle)
        tls = ssl.create_default_context(cafile=str(ca))
        tls.check_hostname = False  # the names are the Service's; we dial loopback
        webhook.wait_healthy(lambda: httpx.get(f"https://127.0.0.1:{port}/readyz",
                                               verify=tls, timeout=1).status_code == 200, 30)
        rs = wait_for("the ReplicaSet", lambda: kube.items(path("replicasets", namespace)))[0]
        body = review(pod(namespace, OwnerRef("apps/v1", "ReplicaSet", rs["metadata"]["name"],
                                              rs["metadata"]["uid"])), namespace=namespace)
        answer = httpx.post(f"https://127.0.0.1:{port}/mutate", content=body,
                            verify=tls).json()
        patch = json.loads(base64.b64decode(answer["response"]["patch"]))
        assert {"op": "add", "path": "/spec/schedulerName",
                "value": "compactor-scheduler"} in patch
        parsed = parse_intent(deploy["metadata"]["annotations"]["compactor.dev/intent"])
        assert parsed.intent is not None and parsed.intent.policy == policy

        # The installed role lets the webhook's watch feed list and watch every built-in
        # owner kind (CRD kinds sync only where their CRDs are installed).
        def synced() -> dict[str, float]:
            text = httpx.get(f"https://127.0.0.1:{port}/metrics", verify=tls).text
            return {line.split('"')[1]: float(line.rsplit(" ", 1)[1])
                    for line in text.splitlines()
                    if line.startswith("compactor_owner_watch_synced{")}
        built_in = {"Namespace", "ReplicaSet", "Deployment", "StatefulSet", "DaemonSet", "Job",
                    "CronJob"}
        wait_for("the webhook's owner watches", lambda: all(
            synced().get(k) == 1 for k in built_in))
        assert "watch of" not in (tmp_path / "webhook.log").read_text()
        # Nor does the controller's role refuse any of its informers a list or a watch.
        assert not [line for line in (tmp_path / "controller.log").read_text().splitlines()
                    if "watch /" in line and "403" in line]
    finally:
        kube.delete(path("clustercompactionpolicies", name=policy,
                         api="apis/compactor.dev/v1alpha1"))
        for proc in (controller, webhook):
            if proc is not None:
                proc.stop()
                cluster.processes.remove(proc)


def _as(kube: Kube, user: str, method: str, url: str, body: Any = None) -> int:
    """The status ``user`` gets for one request (impersonated, as kubectl --as does); writes
    are dry runs."""
    try:
        kube.request(method, url, body, "application/merge-patch+json" if method == "PATCH"
                     else "application/json", headers={"Impersonate-User": user},
                     params=None if method == "GET" else {"dryRun": "All"})
    except ApiError as e:
        return e.status
    return 200


def _bind(kube: Kube, namespace: str, user: str, role: str) -> None:
    kube.create(path("rolebindings", namespace), {
        "metadata": {"name": f"{user}-{role}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})


def test_namespace_owners_manage_compaction_policies_in_their_namespace_only(
        installed: None, kube: Kube) -> None:
    """Through the aggregated ClusterRoles: admin and edit in a namespace may create its
    CompactionPolicies, view may read them; nobody of them may touch another namespace's, a
    ClusterCompactionPolicy or the PolicyEvaluation."""
    own, other = (f"rbac-{uuid.uuid4().hex[:6]}" for _ in range(2))
    for ns in (own, other):
        kube.ensure_namespace(ns)
    admin, editor, viewer = (f"{who}-{uuid.uuid4().hex[:4]}" for who in ("ann", "ed", "vi"))
    _bind(kube, own, admin, "admin")
    _bind(kube, own, editor, "edit")
    _bind(kube, own, viewer, "view")
    api = "apis/compactor.dev/v1alpha1"
    policy = {"apiVersion": "compactor.dev/v1alpha1", "kind": "CompactionPolicy",
              "metadata": {"name": "team"}, "spec": {"weight": 10}}
    own_url = path("compactionpolicies", own, api=api)
    try:
        # The aggregation controller fills the default roles in the background.
        wait_for("admin to aggregate CompactionPolicies",
                 lambda: _as(kube, admin, "POST", own_url, policy) == 200)
        wait_for("view to aggregate CompactionPolicies",
                 lambda: _as(kube, viewer, "GET", own_url) == 200)
        assert _as(kube, editor, "POST", own_url, policy) == 200
        kube.create(own_url, policy)
        team = path("compactionpolicies", own, "team", api=api)
        assert _as(kube, admin, "PATCH", team, {"spec": {"weight": 20}}) == 200
        assert _as(kube, editor, "DELETE", team) == 200
        assert _as(kube, viewer, "POST", own_url, policy) == 403
        assert _as(kube, viewer, "DELETE", team) == 403
        assert _as(kube, viewer, "PATCH", team, {"spec": {"weight": 20}}) == 403
        for user in (admin, editor, viewer):
            assert _as(kube, user, "POST", path("compactionpolicies", other, api=api),
                       policy) == 403
            assert _as(kube, user, "POST", path("clustercompactionpolicies", api=api), {
                **policy, "kind": "ClusterCompactionPolicy"}) == 403
            assert _as(kube, user, "POST", path("policyevaluations", api=api), {
                "apiVersion": "compactor.dev/v1alpha1", "kind": "PolicyEvaluation",
                "metadata": {"name": "policy-evaluation"}, "spec": {"precedence": []}}) == 403
    finally:
        for ns in (own, other):
            kube.delete(path("namespaces", name=ns))
