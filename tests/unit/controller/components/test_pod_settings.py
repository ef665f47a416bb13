"""The Pod settings of the compaction scheduler and the descheduler runs."""

from __future__ import annotations

from controller.components.pod_settings import (
    DEFAULT_RESOURCES,
    PodRuntime,
    restricted_security_context,
)
from controller.components.scheduler import render_scheduler_config, scheduler_deployment


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
        "CKV_K8S_11", "CKV_K8S_15", "CKV_K8S_38", "CKV_K8S_43"}
    limited = PodRuntime("registry.example/descheduler@sha256:" + "0" * 64, "Always",
                         {**DEFAULT_RESOURCES, "limits": {"cpu": "1", "memory": "256Mi"}})
    # Only the token stays: a CPU limit, Always and a digest each end their skip.
    assert _checks(limited.scan_skips(limited.image)) == {"CKV_K8S_38"}
    annotations = default.scan_skips(default.image, {"CKV_K8S_99": "why"})
    assert list(annotations) == [f"checkov.io/skip{i}" for i in range(1, 6)]
    # checkov splits each value on '=' into exactly a check id and a reason.
    assert all(len(v.split("=")) == 2 and v.split("=")[1] for v in annotations.values())


def test_the_compaction_scheduler_runs_without_profiling() -> None:
    assert render_scheduler_config()["enableProfiling"] is False
    deploy = scheduler_deployment(PodRuntime("registry.k8s.io/kube-scheduler"),
                                  "registry.k8s.io/kube-scheduler:v1.36.3", "h")
    assert {"CKV_K8S_114", "CKV_K8S_115", "CKV2_K8S_6"} <= _checks(
        deploy["metadata"]["annotations"])
