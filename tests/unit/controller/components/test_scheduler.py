"""The compaction scheduler's config and Deployment, and the controller's settings from its
environment (one loader, every bad variable reported at once)."""

from __future__ import annotations

import pytest

from controller.components.pod_settings import PodRuntime, scheduler_image
from controller.components.scheduler import render_scheduler_config, scheduler_deployment
from controller.process.settings import SettingsError, load


def test_config_has_one_most_allocated_profile_and_its_own_lease() -> None:
    cfg = render_scheduler_config()
    assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert cfg["leaderElection"] == {"leaderElect": True, "resourceNamespace": "compactor-system",
                                     "resourceName": "compactor-scheduler"}
    (profile,) = cfg["profiles"]
    assert profile["schedulerName"] == "compactor-scheduler"
    fit, spread = profile["pluginConfig"]
    assert fit["name"] == "NodeResourcesFit"
    # Nothing scores against packing: no balanced allocation, no system-default spreading, no
    # pull towards the nodes that have a Pod's image.
    assert profile["plugins"]["score"]["disabled"] == [
        {"name": "NodeResourcesBalancedAllocation"}, {"name": "ImageLocality"}]
    # Every feasible node is scored, as the planner's simulation scores them.
    assert cfg["percentageOfNodesToScore"] == 100
    # A draining node's PreferNoSchedule taint outweighs MostAllocated and every other score.
    assert profile["plugins"]["score"]["enabled"] == [{"name": "TaintToleration", "weight": 20}]
    assert spread == {"name": "PodTopologySpread",
                      "args": {"defaultingType": "List", "defaultConstraints": []}}
    assert fit["args"]["scoringStrategy"] == {
        "type": "MostAllocated",
        "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}
    assert "clientConnection" not in cfg


def test_config_names_its_extender_ignorable_and_unable_to_outvote_a_taint() -> None:
    (extender,) = render_scheduler_config()["extenders"]
    assert extender == {
        "urlPrefix": "http://127.0.0.1:10262", "prioritizeVerb": "prioritize", "weight": 1,
        "enableHTTPS": False, "httpTimeout": "2s", "nodeCacheCapable": True, "ignorable": True}
    # Its top score, 10 × weight × 10, is MostAllocated's whole range at weight 1; every score
    # but TaintToleration together stays below one soft taint's cost (100 × 20).
    (profile,) = render_scheduler_config()["profiles"]
    others = 1 + 2 + 2 + 2 + 1
    assert 10 * extender["weight"] * 10 == 100
    assert (others + extender["weight"]) * 100 < 100 * profile["plugins"]["score"][
        "enabled"][0]["weight"]
    assert "extenders" not in render_scheduler_config(with_extender=False)


def test_the_extender_runs_beside_the_scheduler_from_compactors_image_on_its_loopback() -> None:
    runtime = PodRuntime("registry.k8s.io/kube-scheduler")
    deploy = scheduler_deployment(runtime, "registry.k8s.io/kube-scheduler:v1.36.3", "h", "ops",
                                  "compactor:0.1.0")
    spec = deploy["spec"]["template"]["spec"]
    scheduler, extender = spec["containers"]
    assert extender["image"] == "compactor:0.1.0"
    assert extender["command"] == ["compactor-extender"]
    assert extender["env"] == [{"name": "COMPACTOR_EXTENDER_PORT", "value": "10262"}]
    # No port to publish or probe: it listens on the Pod's loopback, for the scheduler alone.
    assert "ports" not in extender and "livenessProbe" not in extender
    # The scheduler's token (its account lists and watches Pods), none of the config's files.
    assert [m["name"] for m in extender["volumeMounts"]] == ["api-access"]
    assert extender["securityContext"] == scheduler["securityContext"]
    skipped = {v.split("=")[0] for k, v in deploy["metadata"]["annotations"].items()
               if k.startswith("checkov.io/skip")}
    assert {"CKV_K8S_8", "CKV_K8S_9", "CKV_K8S_43"} <= skipped
    # Without Compactor's image there is no extender, and no check to skip for one.
    alone = scheduler_deployment(runtime, "registry.k8s.io/kube-scheduler@sha256:ab", "h")
    assert len(alone["spec"]["template"]["spec"]["containers"]) == 1
    assert not {"CKV_K8S_8", "CKV_K8S_9", "CKV_K8S_43"} & {
        v.split("=")[0] for v in alone["metadata"]["annotations"].values()}


def test_the_extenders_image_comes_from_the_controllers_environment() -> None:
    assert load({}).plan.runtime.extender_image is None
    assert load({"COMPACTOR_EXTENDER_IMAGE": "mirror/compactor:0.1.0"}
                ).plan.runtime.extender_image == "mirror/compactor:0.1.0"


@pytest.mark.parametrize(("override", "tag", "digest", "version", "image"), [
    (None, None, None, "v1.36.3", "registry.k8s.io/kube-scheduler:v1.36.3"),
    (None, None, None, "v1.35.4-gke.1200", "registry.k8s.io/kube-scheduler:v1.35.4"),
    (None, "v1.36.1", None, "v1.36.3", "registry.k8s.io/kube-scheduler:v1.36.1"),
    (None, None, "sha256:abc", "v1.36.3", "registry.k8s.io/kube-scheduler@sha256:abc"),
    ("mirror.example/sched:v1", None, None, "v1.36.3", "mirror.example/sched:v1"),
])
def test_scheduler_image_follows_the_cluster_unless_pinned(
        override: str | None, tag: str | None, digest: str | None, version: str,
        image: str) -> None:
    assert scheduler_image(override, tag, digest, version) == image


def test_runtime_settings_from_environment_reach_the_pods() -> None:
    settings = load({
        "COMPACTION_DESCHEDULER_IMAGE": "mirror/desched:v0.36.0",
        "COMPACTION_DESCHEDULER_IMAGE_PULL_POLICY": "Always",
        "COMPACTION_DESCHEDULER_RESOURCES": '{"requests": {"cpu": "10m"}}',
        "COMPACTION_DESCHEDULER_IMAGE_PULL_SECRETS": "regcred, other",
        "COMPACTION_SCHEDULER_IMAGE_TAG": "v1.36.0",
    }).runtime
    assert settings.descheduler.image == "mirror/desched:v0.36.0"
    assert settings.descheduler.pull_policy == "Always"
    assert settings.descheduler.resources == {"requests": {"cpu": "10m"}}
    assert settings.descheduler.image_pull_secrets == ("regcred", "other")
    assert settings.scheduler_image_override == "registry.k8s.io/kube-scheduler:v1.36.0"
    deploy = scheduler_deployment(settings.scheduler, "img:1", "h1")
    pod = deploy["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "img:1"
    assert deploy["spec"]["template"]["metadata"]["annotations"]["compactor.dev/config-hash"] \
        == "h1"


def test_openshift_leaves_the_uid_to_the_platform() -> None:
    plain = load({}).runtime.descheduler.security_context
    openshift = load({"COMPACTION_OPENSHIFT": "true"}).runtime.descheduler.security_context
    assert plain["runAsUser"] == 65532 and "runAsUser" not in openshift
    assert openshift["runAsNonRoot"] is True and openshift["allowPrivilegeEscalation"] is False


@pytest.mark.parametrize("env", [
    {"COMPACTION_DESCHEDULER_IMAGE_PULL_POLICY": "Sometimes"},
    {"COMPACTION_DESCHEDULER_RESOURCES": "{not json"},
    {"COMPACTION_DESCHEDULER_SECURITY_CONTEXT": "[1]"},
    {"COMPACTION_SCHEDULER_IMAGE_TAG": "v1", "COMPACTION_SCHEDULER_IMAGE_DIGEST": "sha256:x"},
])
def test_bad_settings_are_refused_with_the_variable_named(env: dict[str, str]) -> None:
    with pytest.raises(SettingsError, match="COMPACTION_"):
        load(env)


def test_every_bad_variable_is_reported_at_once() -> None:
    with pytest.raises(SettingsError) as caught:
        load({"COMPACTOR_CONTROLLER_RESYNC_SECONDS": "soon",
              "COMPACTOR_CONTROLLER_METRICS_PORT": "http",
              "COMPACTOR_CERT_OVERLAP": "10 minutes",
              "COMPACTOR_CERTS_MODE": "manual",
              "COMPACTION_DESCHEDULER_RESOURCES": "[]",
              "COMPACTION_OPENSHIFT": "perhaps"})
    named = [p.split()[0].rstrip(":") for p in caught.value.problems]
    assert sorted(named) == sorted([
        "COMPACTOR_CONTROLLER_RESYNC_SECONDS", "COMPACTOR_CONTROLLER_METRICS_PORT",
        "COMPACTOR_CERT_OVERLAP", "COMPACTOR_CERTS_MODE", "COMPACTION_DESCHEDULER_RESOURCES",
        "COMPACTION_OPENSHIFT"])


def test_the_controllers_own_settings_and_their_defaults() -> None:
    d = load({"POD_NAME": "c-1"})
    assert (d.namespace, d.resync_seconds, d.metrics_port, d.identity) == (
        "compactor-system", 30.0, 8080, "c-1")
    assert d.metrics_address == "0.0.0.0"
    assert load({"COMPACTOR_CONTROLLER_METRICS_ADDRESS": "127.0.0.1"}).metrics_address == \
        "127.0.0.1"
    assert d.plan.intent_grace.total_seconds() == 35 and d.certs is not None
    assert d.plan.exempt_schedulers == frozenset({"kai-scheduler"})
    s = load({"COMPACTOR_NAMESPACE": "ops", "COMPACTOR_CONTROLLER_RESYNC_SECONDS": "5",
              "COMPACTOR_CONTROLLER_INTENT_GRACE_SECONDS": "2",
              "COMPACTOR_CONTROLLER_METRICS_PORT": "0", "COMPACTOR_CERTS_MODE": "cert-manager",
              "COMPACTOR_LOG_LEVEL": "debug"})
    assert (s.namespace, s.resync_seconds, s.metrics_port, s.log_level) == (
        "ops", 5.0, 0, "DEBUG")
    assert s.plan.intent_grace.total_seconds() == 2 and s.certs is None
    assert load({"COMPACTOR_CONTROLLER_EXEMPT_SCHEDULERS": "kai-scheduler, volcano"}
                ).plan.exempt_schedulers == frozenset({"kai-scheduler", "volcano"})
    assert load({"COMPACTOR_CONTROLLER_EXEMPT_SCHEDULERS": ""}).plan.exempt_schedulers == \
        frozenset()


def test_patch_concurrency_and_pass_budget_are_read_and_bounded() -> None:
    default = load({})
    assert (default.patch_concurrency, default.pass_budget_seconds) == (8, 4.0)
    chosen = load({"COMPACTOR_CONTROLLER_PATCH_CONCURRENCY": "16",
                   "COMPACTOR_CONTROLLER_PASS_BUDGET_SECONDS": "2.5"})
    assert (chosen.patch_concurrency, chosen.pass_budget_seconds) == (16, 2.5)
    with pytest.raises(SettingsError) as caught:
        load({"COMPACTOR_CONTROLLER_PATCH_CONCURRENCY": "0",
              "COMPACTOR_CONTROLLER_PASS_BUDGET_SECONDS": "-1"})
    assert len(caught.value.problems) == 2
