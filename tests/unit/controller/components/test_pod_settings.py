"""The Pod settings of the compaction scheduler and the descheduler runs."""

from __future__ import annotations

import json

import pytest

from controller.components.pod_settings import (
    API_ACCESS_PATH,
    DEFAULT_RESOURCES,
    PodRuntime,
    pinned,
    restricted_security_context,
)
from controller.components.scheduler import render_scheduler_config, scheduler_deployment
from controller.process.settings import SettingsError, load

DIGEST = "sha256:" + "ab" * 32


def _checks(annotations: dict[str, str]) -> set[str]:
    return {v.split("=")[0] for k, v in annotations.items() if k.startswith("checkov.io/skip")}


def test_the_pod_level_security_context_is_the_containers_pod_fields() -> None:
    spec = PodRuntime("img:1").pod_spec({"name": "c"}, "sa", "cm", "/m")
    assert spec["securityContext"] == {"runAsNonRoot": True, "runAsUser": 65532,
                                       "runAsGroup": 65532,
                                       "seccompProfile": {"type": "RuntimeDefault"}}
    openshift = PodRuntime("img:1", security_context=restricted_security_context(True))
    assert openshift.pod_spec({"name": "c"}, "sa", "cm", "/m")["securityContext"] == {
        "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    # Nothing of a Pod's own in a custom context: no Pod-level one.
    bare = PodRuntime("img:1", security_context={"readOnlyRootFilesystem": True})
    assert "securityContext" not in bare.pod_spec({"name": "c"}, "sa", "cm", "/m")


def test_scan_skips_follow_the_settings() -> None:
    default = PodRuntime("registry.example/descheduler:v0.36.0")
    assert _checks(default.scan_skips(default.image)) == {
        "CKV_K8S_11", "CKV_K8S_15", "CKV_K8S_43"}
    limited = PodRuntime("registry.example/descheduler@sha256:" + "0" * 64, "Always",
                         {**DEFAULT_RESOURCES, "limits": {"cpu": "1", "memory": "256Mi"}})
    # A CPU limit, Always and a digest each end their skip; the token never needs one.
    assert _checks(limited.scan_skips(limited.image)) == set()
    annotations = default.scan_skips(default.image, {"CKV_K8S_99": "why"})
    assert list(annotations) == [f"checkov.io/skip{i}" for i in range(1, 5)]
    # checkov splits each value on '=' into exactly a check id and a reason.
    assert all(len(v.split("=")) == 2 and v.split("=")[1] for v in annotations.values())


def test_the_compaction_scheduler_runs_without_profiling() -> None:
    assert render_scheduler_config()["enableProfiling"] is False
    deploy = scheduler_deployment(PodRuntime("registry.k8s.io/kube-scheduler"),
                                  "registry.k8s.io/kube-scheduler:v1.36.3", "h")
    skipped = _checks(deploy["metadata"]["annotations"])
    assert {"CKV_K8S_114", "CKV_K8S_115"} <= skipped
    # deploy/network/scheduler.yaml selects its Pods: nothing to skip there.
    assert "CKV2_K8S_6" not in skipped


def test_the_token_is_projected_short_lived_and_bound_not_the_kubelets() -> None:
    spec = PodRuntime("img:1").pod_spec({"name": "c"}, "sa", "cm", "/m")
    assert spec["automountServiceAccountToken"] is False
    (volume,) = [v for v in spec["volumes"] if v["name"] == "api-access"]
    sources = volume["projected"]["sources"]
    # No audience: the API server's own, which nothing else accepts; an hour, not a year.
    assert sources[0] == {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}
    assert {"configMap", "downwardAPI"} == {k for s in sources[1:] for k in s}
    assert {"name": "api-access", "mountPath": API_ACCESS_PATH, "readOnly": True} in \
        spec["containers"][0]["volumeMounts"]
    assert API_ACCESS_PATH == "/var/run/secrets/kubernetes.io/serviceaccount"


@pytest.mark.parametrize(("image", "expected"), [
    ("registry.k8s.io/descheduler/descheduler:v0.36.0",
     f"registry.k8s.io/descheduler/descheduler@{DIGEST}"),
    ("mirror.example:5000/descheduler", f"mirror.example:5000/descheduler@{DIGEST}"),
    ("mirror.example:5000/descheduler:v1", f"mirror.example:5000/descheduler@{DIGEST}"),
    ("descheduler", f"descheduler@{DIGEST}"),
], ids=["tag", "registry-port", "registry-port-and-tag", "bare"])
def test_a_digest_pins_the_images_repository(image: str, expected: str) -> None:
    assert pinned(image, DIGEST) == expected


def test_the_digest_settings_render_both_images_by_digest() -> None:
    runtime = load({"COMPACTION_DESCHEDULER_IMAGE_DIGEST": DIGEST,
                    "COMPACTION_SCHEDULER_IMAGE_DIGEST": DIGEST}).runtime
    assert runtime.descheduler.image == f"registry.k8s.io/descheduler/descheduler@{DIGEST}"
    assert runtime.scheduler_image_override == f"registry.k8s.io/kube-scheduler@{DIGEST}"
    mirrored = load({"COMPACTION_DESCHEDULER_IMAGE": "mirror.example/descheduler:v0.36.0",
                     "COMPACTION_DESCHEDULER_IMAGE_DIGEST": DIGEST}).runtime
    assert mirrored.descheduler.image == f"mirror.example/descheduler@{DIGEST}"
    with pytest.raises(SettingsError) as e:
        load({"COMPACTION_DESCHEDULER_IMAGE": f"mirror.example/descheduler@{DIGEST}",
              "COMPACTION_DESCHEDULER_IMAGE_DIGEST": DIGEST,
              "COMPACTION_SCHEDULER_IMAGE_DIGEST": "sha256:short"})
    assert e.value.problems == [
        "COMPACTION_DESCHEDULER_IMAGE has a digest already: set it there or in "
        "COMPACTION_DESCHEDULER_IMAGE_DIGEST, not both",
        "COMPACTION_SCHEDULER_IMAGE_DIGEST must be sha256: and 64 lowercase hex digits, not "
        "'sha256:short'"]


def test_placement_settings_reach_the_scheduler_and_the_descheduler_pods() -> None:
    toleration = {"key": "node-role.kubernetes.io/system", "operator": "Exists",
                  "effect": "NoSchedule"}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "pool", "operator": "In", "values": ["system"]}]}]}}}
    runtime = load({
        "COMPACTION_SCHEDULER_NODE_SELECTOR": '{"pool": "system"}',
        "COMPACTION_SCHEDULER_TOLERATIONS": json.dumps([toleration]),
        "COMPACTION_DESCHEDULER_AFFINITY": json.dumps(affinity)}).runtime
    pod = scheduler_deployment(runtime.scheduler, "img:1", "h")["spec"]["template"]["spec"]
    assert (pod["nodeSelector"], pod["tolerations"]) == ({"pool": "system"}, [toleration])
    assert "affinity" not in pod
    desched = runtime.descheduler.pod_spec({"name": "c"}, "sa", "cm", "/m")
    assert desched["affinity"] == affinity
    assert not {"nodeSelector", "tolerations"} & set(desched)
    # Unset: the Pods say nothing of placement, as before.
    assert not {"nodeSelector", "tolerations", "affinity"} & set(
        PodRuntime("img:1").pod_spec({"name": "c"}, "sa", "cm", "/m"))


@pytest.mark.parametrize("env", [
    {"COMPACTION_SCHEDULER_NODE_SELECTOR": '{"pool": 1}'},
    {"COMPACTION_SCHEDULER_NODE_SELECTOR": '["pool"]'},
    {"COMPACTION_SCHEDULER_TOLERATIONS": '{"key": "a"}'},
    {"COMPACTION_SCHEDULER_TOLERATIONS": '["a"]'},
    {"COMPACTION_DESCHEDULER_TOLERATIONS": "[{"},
    {"COMPACTION_DESCHEDULER_AFFINITY": "[]"},
], ids=["selector-value-not-string", "selector-not-object", "tolerations-not-array",
        "toleration-not-object", "tolerations-not-json", "affinity-not-object"])
def test_bad_placement_settings_are_refused_with_the_variable_named(
        env: dict[str, str]) -> None:
    (name,) = env
    with pytest.raises(SettingsError, match=name):
        load(env)
