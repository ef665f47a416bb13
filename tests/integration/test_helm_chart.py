"""The Helm chart (deploy/helm/compactor) with the real helm, against a cluster of its own:
lint, the same objects as the kustomize manifests, every value reaching its object, install,
upgrades that change only what they should, and what uninstall leaves behind.

The webhook configuration the chart installs here points at a closed loopback port
(webhook.clientConfig.url): the API server never dials the webhook Service.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.process.settings import load
from localcluster import ApiError, Cluster, ClusterConfig, Kube
from localcluster.cluster.control_plane import tools_bin
from localcluster.cluster.kube import path, wait_for
from tests.integration.helpers import ROOT

CHART = ROOT / "deploy" / "helm" / "compactor"
NS = "compactor-system"
LOOPBACK = "https://127.0.0.1:1/mutate"
HELM_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance",
               "app.kubernetes.io/version")
Key = tuple[str, str, str]  # kind, namespace ("" when cluster-scoped), name


def _run(argv: list[str], env: dict[str, str] | None = None,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False,
                         env=env)
    if check and out.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed:\n{out.stdout}\n{out.stderr}")
    return out


@pytest.fixture(scope="module")
def bin_dir() -> Path:
    return tools_bin()


@pytest.fixture(scope="module")
def helm_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """helm's cache, config and data in a folder of the test's, never the user's."""
    home = tmp_path_factory.mktemp("helm-home")
    return {**os.environ, "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"), "HELM_DATA_HOME": str(home / "data")}


def helm(bin_dir: Path, env: dict[str, str], *args: str,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    return _run([str(bin_dir / "helm"), *args], env, check)


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def render(bin_dir: Path, env: dict[str, str], *sets: str, chart: Path = CHART,
           crds: bool = False) -> list[dict[str, Any]]:
    args = ["template", "compactor", str(chart), "-n", NS]
    args += ["--include-crds"] if crds else []
    for s in sets:
        args += ["--set", s]
    return docs(helm(bin_dir, env, *args).stdout)


def key(d: dict[str, Any]) -> Key:
    return d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]


def by_key(objects: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    return {key(d): d for d in objects}


def without_helm_labels(d: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(d)
    labels = out["metadata"].get("labels") or {}
    for k in HELM_LABELS:
        labels.pop(k, None)
    return out


# --- the chart as files ----------------------------------------------------------------

def test_helm_lint_passes_strictly(bin_dir: Path, helm_env: dict[str, str]) -> None:
    for extra in ([], ["--set", "certificates.mode=cert-manager", "--set",
                       "metrics.serviceMonitor.enabled=true", "--set",
                       "metrics.prometheusRule.enabled=true", "--set",
                       "grafana.dashboard.enabled=true"],
                  # The production-like values `make lint` scans the chart with.
                  ["-f", str(CHART / "ci" / "production-values.yaml")]):
        out = helm(bin_dir, helm_env, "lint", "--strict", str(CHART), "-n", NS, *extra)
        assert "1 chart(s) linted, 0 chart(s) failed" in out.stdout, out.stdout


@pytest.mark.parametrize(("kustomizations", "sets"), [
    (["deploy"], []),
    (["deploy", "deploy/overlays/prometheus-operator"],
     ["metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true"]),
], ids=["base", "prometheus-operator"])
def test_default_values_render_what_kustomize_builds(
        bin_dir: Path, helm_env: dict[str, str], kustomizations: list[str],
        sets: list[str]) -> None:
    """One source of truth: the chart and the kustomize manifests give the same objects, but
    for Helm's own labels. The Namespace too, labelled alike, which the chart renders only
    when it creates it (as here, with no cluster to look it up in) and keeps when the release
    goes."""
    built = [d for k in kustomizations for d in docs(
        _run([str(bin_dir / "kubectl"), "kustomize", str(ROOT / k)]).stdout)]
    kustomize = {k: without_helm_labels(d) for k, d in by_key(built).items()}
    # The default PolicyEvaluation is the chart's alone, as in the reference chart (rendered
    # once its CRD ships); kustomize users create it themselves.
    chart = {k: without_helm_labels(d) for k, d in by_key(
        render(bin_dir, helm_env, *sets, crds=True)).items()
        if k != ("PolicyEvaluation", "", "policy-evaluation")}
    assert chart[("Namespace", "", NS)]["metadata"].pop("annotations") == {
        "helm.sh/resource-policy": "keep"}
    assert sorted(chart) == sorted(kustomize)
    for k in kustomize:
        assert chart[k] == kustomize[k], k
    # And Helm's labels are on every object it owns (the CRDs in crds/ are plain files).
    for d in render(bin_dir, helm_env, *sets):
        assert d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm", key(d)


def test_another_release_namespace_changes_the_namespace_alone(bin_dir: Path,
                                                                helm_env: dict[str, str]) -> None:
    """Any release namespace: what renders is the default's with compactor-system replaced
    wherever it was (each namespaced object, the roles' ServiceAccount subjects, the webhook
    configuration's Service and its excluded namespaces), and no object names compactor-system
    any more (the admission policies name no account: their parameter is the controller's
    ClusterRoleBinding)."""
    default = helm(bin_dir, helm_env, "template", "c", str(CHART), "-n", NS).stdout
    other = helm(bin_dir, helm_env, "template", "c", str(CHART), "-n", "ops").stdout
    objects = docs(other)
    assert objects == docs(default.replace("compactor-system", "ops"))
    assert "compactor-system" not in yaml.safe_dump_all(objects)
    assert {d["metadata"]["namespace"] for d in objects if "namespace" in d["metadata"]} == {
        "ops"}


@pytest.mark.parametrize(("value", "message"), [
    ("webhook.failurePolicy=Sometimes", "failurePolicy"),
    ("certificates.mode=vault", "mode"),
    ("webhook.timeoutSeconds=1", "timeoutSeconds"),
    ("webhook.clientConfig.url=http://127.0.0.1:1/mutate", "url"),
    ("image.pullPolicy=Sometimes", "pullPolicy"),
    ("webhok.replicas=3", "webhok"),
    ("compactionScheduler.image.tag=v1,compactionScheduler.image.digest=sha256:" + "a" * 64,
     "tag or digest, not both"),
], ids=lambda v: str(v).split("=")[0])
def test_bad_values_are_refused_by_name(bin_dir: Path, helm_env: dict[str, str], value: str,
                                        message: str) -> None:
    out = helm(bin_dir, helm_env, "template", "c", str(CHART), "-n", NS, "--set", value,
               check=False)
    assert out.returncode != 0 and message in out.stderr, out.stderr


def _container(objs: dict[Key, dict[str, Any]], name: str) -> dict[str, Any]:
    spec = objs[("Deployment", NS, name)]["spec"]["template"]["spec"]
    container: dict[str, Any] = spec["containers"][0]
    return container


def _env(objs: dict[Key, dict[str, Any]], name: str) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in _container(objs, name)["env"]}


def _pod(objs: dict[Key, dict[str, Any]], name: str) -> dict[str, Any]:
    pod: dict[str, Any] = objs[("Deployment", NS, name)]["spec"]["template"]["spec"]
    return pod


DIGEST = "sha256:" + "ab" * 32


def test_image_values(bin_dir: Path, helm_env: dict[str, str]) -> None:
    objs = by_key(render(bin_dir, helm_env, "image.repository=registry.example/compactor",
                         "image.tag=1.2.3", "image.pullPolicy=Always",
                         "imagePullSecrets[0].name=regcred", "imagePullSecrets[1].name=other"))
    for name in ("compactor-webhook", "compactor-controller"):
        c = _container(objs, name)
        assert c["image"] == "registry.example/compactor:1.2.3"
        assert c["imagePullPolicy"] == "Always"
        assert _pod(objs, name)["imagePullSecrets"] == [{"name": "regcred"}, {"name": "other"}]
    env = _env(objs, "compactor-controller")
    # The Pods the controller creates get the same pull secrets.
    assert env["COMPACTION_DESCHEDULER_IMAGE_PULL_SECRETS"] == "regcred,other"
    assert env["COMPACTION_SCHEDULER_IMAGE_PULL_SECRETS"] == "regcred,other"
    pinned = by_key(render(bin_dir, helm_env, "image.tag=1.2.3", f"image.digest={DIGEST}"))
    assert _container(pinned, "compactor-webhook")["image"] == f"compactor@{DIGEST}"


def test_placement_replicas_and_resources_per_component(bin_dir: Path,
                                                        helm_env: dict[str, str]) -> None:
    objs = by_key(render(
        bin_dir, helm_env, "webhook.replicas=3", "controller.replicas=1",
        "webhook.resources.requests.cpu=250m", "controller.resources.limits.memory=1Gi",
        "webhook.nodeSelector.pool=system", "controller.tolerations[0].key=dedicated",
        "controller.tolerations[0].operator=Exists",
        "webhook.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0].key=pool",
        "webhook.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0].operator=Exists",
        "controller.priorityClassName=high", "webhook.priorityClassName=",
        "webhook.podDisruptionBudget.minAvailable=2",
        "compactionScheduler.nodeSelector.pool=system",
        "compactionScheduler.tolerations[0].key=dedicated",
        "compactionScheduler.tolerations[0].operator=Exists",
        "descheduler.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0].key=pool",
        "descheduler.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0].operator=Exists"))
    web, ctl = objs[("Deployment", NS, "compactor-webhook")], objs[
        ("Deployment", NS, "compactor-controller")]
    assert web["spec"]["replicas"] == 3 and ctl["spec"]["replicas"] == 1
    assert _container(objs, "compactor-webhook")["resources"]["requests"]["cpu"] == "250m"
    assert _container(objs, "compactor-controller")["resources"]["limits"]["memory"] == "1Gi"
    assert _pod(objs, "compactor-webhook")["nodeSelector"] == {"pool": "system"}
    assert "nodeSelector" not in _pod(objs, "compactor-controller")
    assert _pod(objs, "compactor-controller")["tolerations"] == [
        {"key": "dedicated", "operator": "Exists"}]
    assert "nodeAffinity" in _pod(objs, "compactor-webhook")["affinity"]
    assert _pod(objs, "compactor-controller")["priorityClassName"] == "high"
    assert "priorityClassName" not in _pod(objs, "compactor-webhook")
    assert objs[("PodDisruptionBudget", NS, "compactor-webhook")]["spec"]["minAvailable"] == 2
    # The Pods the controller creates, placed through its settings (which load them).
    env = _env(objs, "compactor-controller")
    runtime = load(env).runtime
    assert runtime.scheduler.node_selector == {"pool": "system"}
    assert runtime.scheduler.tolerations == ({"key": "dedicated", "operator": "Exists"},)
    assert runtime.descheduler.affinity["nodeAffinity"]
    assert not runtime.descheduler.node_selector and not runtime.scheduler.affinity
    # Unset: no variable at all, as `kustomize build deploy/` renders none.
    assert not {k for k in _env(by_key(render(bin_dir, helm_env)), "compactor-controller")
                if k.endswith(("NODE_SELECTOR", "TOLERATIONS", "AFFINITY"))}


def test_webhook_values_reach_the_configuration(bin_dir: Path, helm_env: dict[str, str]) -> None:
    objs = by_key(render(bin_dir, helm_env, "webhook.timeoutSeconds=7",
                         "webhook.failurePolicy=Fail", "webhook.excludedNamespaces={monitoring,"
                         "kube-system}", f"webhook.clientConfig.url={LOOPBACK}",
                         "webhook.extraEnv[0].name=COMPACTOR_WEBHOOK_CACHE_TTL_SECONDS",
                         "webhook.extraEnv[0].value=60"))
    (hook,) = objs[("MutatingWebhookConfiguration", "", "compactor-webhook")]["webhooks"]
    assert hook["timeoutSeconds"] == 7 and hook["failurePolicy"] == "Fail"
    assert hook["clientConfig"] == {"url": LOOPBACK}
    assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "kube-system", NS, "monitoring"]
    env = _env(objs, "compactor-webhook")
    # The webhook's own budget stays one second below the API server's deadline.
    assert env["COMPACTOR_WEBHOOK_BUDGET_SECONDS"] == "6"
    assert env["COMPACTOR_WEBHOOK_CACHE_TTL_SECONDS"] == "60"


def test_controller_runtime_values_become_its_environment(bin_dir: Path,
                                                         helm_env: dict[str, str]) -> None:
    objs = by_key(render(
        bin_dir, helm_env, "descheduler.image=mirror.example/descheduler:v0.36.0",
        "compactionScheduler.image.tag=v1.36.3", "openshift.enabled=true",
        "controller.extraEnv[0].name=COMPACTION_DESCHEDULER_IMAGE_PULL_POLICY",
        "controller.extraEnv[0].value=Always"))
    env = _env(objs, "compactor-controller")
    assert env["COMPACTION_DESCHEDULER_IMAGE"] == "mirror.example/descheduler:v0.36.0"
    assert env["COMPACTION_SCHEDULER_IMAGE_TAG"] == "v1.36.3"
    assert env["COMPACTION_OPENSHIFT"] == "true"
    assert env["COMPACTION_DESCHEDULER_IMAGE_PULL_POLICY"] == "Always"
    mirrored = _env(by_key(render(bin_dir, helm_env,
                                  "compactionScheduler.image.repository=mirror.example/ks",
                                  f"compactionScheduler.image.digest={DIGEST}")),
                    "compactor-controller")
    assert mirrored["COMPACTION_SCHEDULER_IMAGE"] == f"mirror.example/ks@{DIGEST}"
    assert "COMPACTION_SCHEDULER_IMAGE_DIGEST" not in mirrored
    # The controller's settings read exactly these names.
    from controller.process import settings as controller_settings
    loaded = controller_settings.load(
        {**env, **{k: v for k, v in mirrored.items() if "SCHEDULER" in k}}).runtime
    assert loaded.openshift and loaded.scheduler_image_override == f"mirror.example/ks@{DIGEST}"
    assert loaded.descheduler.pull_policy == "Always"


def test_cert_manager_mode(bin_dir: Path, helm_env: dict[str, str]) -> None:
    objs = by_key(render(bin_dir, helm_env, "certificates.mode=cert-manager"))
    mwc = objs[("MutatingWebhookConfiguration", "", "compactor-webhook")]
    assert mwc["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": f"{NS}/compactor-webhook"}
    assert _env(objs, "compactor-controller")["COMPACTOR_CERTS_MODE"] == "cert-manager"
    cert = objs[("Certificate", NS, "compactor-webhook")]["spec"]
    assert cert["secretName"] == "compactor-webhook-tls"
    assert cert["dnsNames"] == ["compactor-webhook", f"compactor-webhook.{NS}",
                                f"compactor-webhook.{NS}.svc",
                                f"compactor-webhook.{NS}.svc.cluster.local"]
    assert cert["issuerRef"] == {"name": "compactor-webhook", "kind": "Issuer",
                                 "group": "cert-manager.io"}
    assert objs[("Issuer", NS, "compactor-webhook")]["spec"] == {"selfSigned": {}}
    own = by_key(render(bin_dir, helm_env, "certificates.mode=cert-manager",
                        "certificates.certManager.issuerRef.name=corp-ca",
                        "certificates.certManager.issuerRef.kind=ClusterIssuer"))
    assert ("Issuer", NS, "compactor-webhook") not in own
    assert own[("Certificate", NS, "compactor-webhook")]["spec"]["issuerRef"] == {
        "name": "corp-ca", "kind": "ClusterIssuer"}
    # Self mode (the default) has neither.
    default = by_key(render(bin_dir, helm_env))
    assert not [k for k in default if k[0] in ("Certificate", "Issuer")]
    assert "annotations" not in default[
        ("MutatingWebhookConfiguration", "", "compactor-webhook")]["metadata"]


def test_monitoring_objects_carry_the_shipped_rules_and_dashboard(
        bin_dir: Path, helm_env: dict[str, str]) -> None:
    objs = by_key(render(bin_dir, helm_env, "metrics.prometheusRule.enabled=true",
                         "metrics.prometheusRule.labels.release=kps",
                         "metrics.serviceMonitor.enabled=true",
                         "metrics.serviceMonitor.labels.release=kps",
                         "metrics.serviceMonitor.interval=15s", "grafana.dashboard.enabled=true"))
    rule = objs[("PrometheusRule", NS, "compactor")]
    assert rule["spec"] == yaml.safe_load((ROOT / "deploy/prometheus/alerts.yaml").read_text())
    assert rule["metadata"]["labels"]["release"] == "kps"
    monitor = objs[("ServiceMonitor", NS, "compactor")]
    assert monitor["metadata"]["labels"]["release"] == "kps"
    assert [e["interval"] for e in monitor["spec"]["endpoints"]] == ["15s", "15s"]
    board = objs[("ConfigMap", NS, "compactor-dashboard")]
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(board["data"]["compactor.json"]) == json.loads(
        (ROOT / "deploy/grafana/compactor.json").read_text())
    assert not [k for k in by_key(render(bin_dir, helm_env))
                if k[0] in ("PrometheusRule", "ServiceMonitor", "ConfigMap")]


def test_network_policies_are_rendered_unless_turned_off(bin_dir: Path,
                                                         helm_env: dict[str, str]) -> None:
    """One NetworkPolicy per component by default; without them the policy scan's finding on
    the Deployments is skipped with its reason, as a value that decides a skip does."""
    def skips(objects: dict[Key, dict[str, Any]], name: str) -> list[str]:
        meta = objects[("Deployment", NS, name)]["metadata"]
        return [v.split("=")[0] for v in (meta.get("annotations") or {}).values()]
    on = by_key(render(bin_dir, helm_env))
    assert {k[2] for k in on if k[0] == "NetworkPolicy"} == {
        f"compactor-{c}" for c in ("webhook", "controller", "scheduler", "descheduler")}
    off = by_key(render(bin_dir, helm_env, "networkPolicy.enabled=false"))
    assert not [k for k in off if k[0] == "NetworkPolicy"]
    for name in ("compactor-webhook", "compactor-controller"):
        assert "CKV2_K8S_6" not in skips(on, name) and "CKV2_K8S_6" in skips(off, name)


def test_policy_evaluation_enabled_is_the_controllers_setting_not_an_object(
        bin_dir: Path, helm_env: dict[str, str]) -> None:
    """The controller creates the default PolicyEvaluation when absent and never overwrites
    it; a chart-owned copy would be reset by every upgrade. So the value is the setting."""
    for sets, expected in (((), None), (("policyEvaluation.enabled=false",), "false")):
        objects = render(bin_dir, helm_env, *sets, crds=True)
        assert not [d for d in objects if d["kind"] == "PolicyEvaluation"]
        assert "policyevaluations.compactor.dev" in {
            d["metadata"]["name"] for d in objects if d["kind"] == "CustomResourceDefinition"}
        assert _env(by_key(objects), "compactor-controller").get(
            "COMPACTOR_POLICY_EVALUATION_DEFAULT") == expected


# --- on a cluster of its own -----------------------------------------------------------

@pytest.fixture(scope="module")
def fresh(bin_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A control plane for this module alone: what uninstall leaves must be judged on a
    cluster nothing else has touched."""
    c = Cluster(ClusterConfig(workdir=tmp_path_factory.mktemp("helm-cluster"), bin_dir=bin_dir))
    with c:
        c.start_workers()
        kube = c.client()
        c.add_nodes(kube, ["helm-node-0", "helm-node-1"])
        kube.close()
        yield c


@pytest.fixture(scope="module")
def fresh_kube(fresh: Cluster) -> Iterator[Kube]:
    client = fresh.client()
    yield client
    client.close()


def _apply_crds(fresh: Cluster, kube: Kube, folder: Path) -> list[str]:
    """kubectl applies them (PyYAML reads YAML 1.1 and takes the enum value "=" for a tag)."""
    out = _run([str(fresh.bin / "kubectl"), f"--kubeconfig={fresh.kubeconfig}", "apply",
                "--server-side", "-f", str(folder), "-o", "name"])
    names = [line.split("/", 1)[1] for line in out.stdout.split()]
    assert names, out.stdout
    def established(name: str) -> bool:
        status = kube.get(path("customresourcedefinitions", name=name)).get("status") or {}
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in status.get("conditions") or [])

    for name in names:
        wait_for(f"{name} established", lambda: established(name))  # noqa: B023
    return names


@pytest.fixture(scope="module")
def operator_crds(fresh: Cluster, fresh_kube: Kube, bin_dir: Path) -> list[str]:
    """The Prometheus Operator's and cert-manager's CRDs (the operators themselves are not
    needed: the API server validates their objects against these schemas)."""
    crds = bin_dir.parent / "crds"
    return (_apply_crds(fresh, fresh_kube, crds / "prometheus-operator") +
            _apply_crds(fresh, fresh_kube, crds / "cert-manager"))


INSTALL = [f"webhook.clientConfig.url={LOOPBACK}", "metrics.serviceMonitor.enabled=true",
           "metrics.prometheusRule.enabled=true"]


@pytest.fixture(scope="module")
def release(fresh: Cluster, fresh_kube: Kube, operator_crds: list[str], bin_dir: Path,
            helm_env: dict[str, str]) -> dict[str, str]:
    env = {**helm_env, "KUBECONFIG": str(fresh.kubeconfig)}
    args = ["install", "compactor", str(CHART), "-n", NS, "--create-namespace",
            "--wait", "--timeout", "3m"]
    for s in INSTALL:
        args += ["--set", s]
    helm(bin_dir, env, *args)
    return env


_PLURALS: dict[tuple[str, str], str] = {}


def _live(kube: Kube, k: Key, api: str) -> dict[str, Any]:
    """The stored object, its REST plural from discovery."""
    kind, ns, name = k
    if (api, kind) not in _PLURALS:
        for r in kube.get(f"/{api}")["resources"]:
            if "/" not in r["name"]:
                _PLURALS[(api, r["kind"])] = r["name"]
    plural = _PLURALS[(api, kind)]
    return kube.get("/".join(["", api, *(["namespaces", ns] if ns else []), plural, name]))


def _api(d: dict[str, Any]) -> str:
    version = d["apiVersion"]
    return "api/v1" if version == "v1" else f"apis/{version}"


def _manifest(bin_dir: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    return docs(helm(bin_dir, env, "get", "manifest", "compactor", "-n", NS).stdout)


def test_install_creates_every_object_and_the_deployments_roll_out(
        release: dict[str, str], fresh_kube: Kube, bin_dir: Path) -> None:
    manifest = _manifest(bin_dir, release)
    assert len(manifest) >= 25
    for d in manifest:
        live = _live(fresh_kube, key(d), _api(d))
        assert live["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        assert live["metadata"]["annotations"]["meta.helm.sh/release-name"] == "compactor"
    # --wait held the install until both Deployments were available (kwok runs the Pods).
    for name in ("compactor-webhook", "compactor-controller"):
        status = fresh_kube.get(path("deployments", NS, name))["status"]
        assert status.get("availableReplicas") == 2, status
    mwc = fresh_kube.get(path("mutatingwebhookconfigurations", name="compactor-webhook"))
    assert mwc["webhooks"][0]["clientConfig"]["url"] == LOOPBACK
    fresh_kube.get(path("customresourcedefinitions",
                        name="clustercompactionpolicies.compactor.dev"))
    out = helm(bin_dir, release, "status", "compactor", "-n", NS).stdout
    assert "STATUS: deployed" in out


def test_cert_manager_mode_objects_pass_the_api_servers_schemas(
        release: dict[str, str], operator_crds: list[str], bin_dir: Path,
        tmp_path: Path) -> None:
    rendered = helm(bin_dir, release, "template", "compactor", str(CHART), "-n", NS,
                    "--set", "certificates.mode=cert-manager", *sum(
                        (["--set", s] for s in INSTALL), [])).stdout
    file = tmp_path / "cert-manager.yaml"
    file.write_text(rendered)
    out = _run([str(bin_dir / "kubectl"), f"--kubeconfig={release['KUBECONFIG']}", "apply",
                "--server-side", "--force-conflicts", "--dry-run=server", "-f", str(file)])
    assert "certificate.cert-manager.io/compactor-webhook serverside-applied" in out.stdout
    assert "issuer.cert-manager.io/compactor-webhook serverside-applied" in out.stdout


VOLATILE_META = ("resourceVersion", "managedFields", "generation", "uid", "creationTimestamp")


def _state(kube: Kube, manifest: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    """Every release object as stored, without what the API server and controllers move."""
    out = {}
    for d in manifest:
        live = copy.deepcopy(_live(kube, key(d), _api(d)))
        live.pop("status", None)
        for field in VOLATILE_META:
            live["metadata"].pop(field, None)
        (live["metadata"].get("annotations") or {}).pop("deployment.kubernetes.io/revision",
                                                        None)
        out[key(d)] = live
    return out


UPGRADES = [
    ("webhook.replicas=3", {("Deployment", NS, "compactor-webhook")}),
    ("webhook.timeoutSeconds=5", {("MutatingWebhookConfiguration", "", "compactor-webhook"),
                                  ("Deployment", NS, "compactor-webhook")}),
    ("controller.extraEnv[0].name=COMPACTION_DESCHEDULER_IMAGE_PULL_POLICY,"
     "controller.extraEnv[0].value=Always", {("Deployment", NS, "compactor-controller")}),
    ("metrics.prometheusRule.labels.release=kps", {("PrometheusRule", NS, "compactor")}),
    ("webhook.podDisruptionBudget.minAvailable=2",
     {("PodDisruptionBudget", NS, "compactor-webhook")}),
]


@pytest.mark.parametrize(("value", "changed"), UPGRADES, ids=[u[0].split("=")[0] for u in UPGRADES])
def test_upgrade_changing_one_value_changes_only_its_objects(
        release: dict[str, str], fresh_kube: Kube, bin_dir: Path, value: str,
        changed: set[Key]) -> None:
    # The controller writes the caBundle in place; an upgrade must leave it there.
    bundle = "bm90LWEtcmVhbC1idW5kbGU="
    mwc_url = path("mutatingwebhookconfigurations", name="compactor-webhook")
    mwc = fresh_kube.get(mwc_url)
    mwc["webhooks"][0]["clientConfig"]["caBundle"] = bundle
    fresh_kube.request("PUT", mwc_url, mwc)
    manifest = _manifest(bin_dir, release)
    before = _state(fresh_kube, manifest)
    revision = json.loads(helm(bin_dir, release, "status", "compactor", "-n", NS, "-o",
                               "json").stdout)["version"]
    helm(bin_dir, release, "upgrade", "compactor", str(CHART), "-n", NS, "--reuse-values",
         "--set", value, "--wait", "--timeout", "3m")
    after = _state(fresh_kube, manifest)
    assert sorted(after) == sorted(before)
    assert {k for k in before if before[k] != after[k]} == changed
    status = json.loads(helm(bin_dir, release, "status", "compactor", "-n", NS, "-o",
                             "json").stdout)
    assert status["version"] == revision + 1 and status["info"]["status"] == "deployed"
    assert fresh_kube.get(mwc_url)["webhooks"][0]["clientConfig"]["caBundle"] == bundle


# Namespaced objects every namespace has, created by the control plane itself.
NAMESPACE_DEFAULTS = {("ServiceAccount", NS, "default"), ("ConfigMap", NS, "kube-root-ca.crt")}


def _compactor_objects(kube: Kube) -> set[Key]:
    """Everything in compactor-system, and every cluster-scoped object that is Compactor's
    (its name or labels say so, or its API group is compactor.dev), by discovery."""
    groups = [("api/v1", kube.get("/api/v1"))]
    for g in kube.get("/apis")["groups"]:
        version = g["preferredVersion"]["groupVersion"]
        groups.append((f"apis/{version}", kube.get(f"/apis/{version}")))
    found: set[Key] = set()
    for api, resources in groups:
        for r in resources["resources"]:
            if "/" in r["name"] or "list" not in r.get("verbs", []) or r["kind"] == "Event":
                continue
            url = f"/{api}/namespaces/{NS}/{r['name']}" if r["namespaced"] else \
                f"/{api}/{r['name']}"
            try:
                items = kube.items(url)
            except ApiError as e:
                if e.status in (404, 405):
                    continue
                raise
            for item in items:
                meta = item["metadata"]
                if (meta.get("labels") or {}).get("kube-aggregator.kubernetes.io/automanaged"):
                    continue  # the APIService the API server keeps for a CRD's group
                ours = r["namespaced"] or "compactor" in meta["name"] or api.startswith(
                    "apis/compactor.dev/") or (meta.get("labels") or {}).get(
                    "app.kubernetes.io/name") == "compactor"
                if ours:
                    found.add((r["kind"], meta.get("namespace", ""), meta["name"]))
    return found


def test_the_chart_labels_the_namespace_that_create_namespace_made(
        release: dict[str, str], fresh_kube: Kube) -> None:
    """Absent at install, so the chart's: labelled as deploy/namespace.yaml labels it, and
    kept when the release goes."""
    meta = fresh_kube.get(path("namespaces", name=NS))["metadata"]
    assert meta["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert meta["labels"]["compactor.dev/ignore"] == "true"
    assert meta["annotations"]["helm.sh/resource-policy"] == "keep"
    assert meta["annotations"]["meta.helm.sh/release-name"] == "compactor"


def test_uninstall_leaves_only_the_crds_their_policies_and_the_namespace(
        release: dict[str, str], fresh_kube: Kube, bin_dir: Path, operator_crds: list[str]
        ) -> None:
    """As docs/install.md says: Helm never deletes the CRDs of crds/ (that would delete every
    policy), and the namespace was made by --create-namespace."""
    policy = "keep-me"
    fresh_kube.create(path("clustercompactionpolicies", api="apis/compactor.dev/v1alpha1"), {
        "apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
        "metadata": {"name": policy}, "spec": {}})
    helm(bin_dir, release, "uninstall", "compactor", "-n", NS, "--wait", "--timeout", "3m")
    left = wait_for("the release's objects gone", lambda: (
        lambda found: found if not [k for k in found if k[0] in ("Deployment", "Pod")]
        else None)(_compactor_objects(fresh_kube)), timeout=120)
    others = {("CustomResourceDefinition", "", n) for n in operator_crds}
    assert left - NAMESPACE_DEFAULTS - others == {
        ("CustomResourceDefinition", "", "clustercompactionpolicies.compactor.dev"),
        ("CustomResourceDefinition", "", "compactionpolicies.compactor.dev"),
        ("CustomResourceDefinition", "", "policyevaluations.compactor.dev"),
        ("CustomResourceDefinition", "", "clusterstaticpolicies.compactor.dev"),
        ("CustomResourceDefinition", "", "staticpolicies.compactor.dev"),
        ("ClusterCompactionPolicy", "", policy),
        ("Namespace", "", NS),
    }
    assert "compactor" not in helm(bin_dir, release, "list", "-n", NS).stdout.split()
