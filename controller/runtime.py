"""Runtime settings for the Pods the controller creates (scheduler and descheduler).

Read once from the controller's environment: ``COMPACTION_DESCHEDULER_*`` and
``COMPACTION_SCHEDULER_*``, plus ``COMPACTION_OPENSHIFT`` for arbitrary-UID security contexts.
JSON-valued variables (resources, security context) are validated here, at start-up.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

DESCHEDULER_IMAGE: Final = "registry.k8s.io/descheduler/descheduler:v0.36.0"
SCHEDULER_REPOSITORY: Final = "registry.k8s.io/kube-scheduler"
_PULL_POLICIES: Final = frozenset({"Always", "IfNotPresent", "Never"})

DEFAULT_RESOURCES: Final[Mapping[str, Any]] = {
    "requests": {"cpu": "50m", "memory": "64Mi"},
    "limits": {"memory": "256Mi"},
}


def _restricted(openshift: bool) -> dict[str, Any]:
    """The restricted Pod Security profile; OpenShift assigns the UID itself."""
    ctx: dict[str, Any] = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsNonRoot": True,
    }
    if not openshift:
        ctx["runAsUser"] = 65532
        ctx["runAsGroup"] = 65532
    return ctx


class SettingsError(ValueError):
    """A ``COMPACTION_*`` variable has a value the controller cannot use."""


@dataclass(frozen=True)
class PodRuntime:
    image: str
    pull_policy: str = "IfNotPresent"
    resources: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_RESOURCES))
    security_context: Mapping[str, Any] = field(default_factory=lambda: _restricted(False))
    image_pull_secrets: tuple[str, ...] = ()

    def pod_spec(self, container: Mapping[str, Any], service_account: str, config_map: str,
                 mount: str, **extra: Any) -> dict[str, Any]:
        """A Pod spec for one container that reads one ConfigMap, with these settings."""
        spec: dict[str, Any] = {
            "serviceAccountName": service_account,
            "priorityClassName": "system-cluster-critical",
            **extra,
            "containers": [{
                **container, "imagePullPolicy": self.pull_policy,
                "resources": dict(self.resources),
                "securityContext": dict(self.security_context),
                "volumeMounts": [{"name": "config", "mountPath": mount, "readOnly": True}],
            }],
            "volumes": [{"name": "config", "configMap": {"name": config_map}}],
        }
        if self.image_pull_secrets:
            spec["imagePullSecrets"] = [{"name": s} for s in self.image_pull_secrets]
        return spec


@dataclass(frozen=True)
class RuntimeSettings:
    descheduler: PodRuntime
    scheduler: PodRuntime
    # None: derive the tag from the API server's version; else a full image reference.
    scheduler_image_override: str | None = None
    openshift: bool = False


def _json_map(env: Mapping[str, str], name: str, default: Mapping[str, Any]) -> Mapping[str, Any]:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise SettingsError(f"{name} must be a JSON object: {e}") from e
    if not isinstance(value, dict):
        raise SettingsError(f"{name} must be a JSON object, not {type(value).__name__}")
    return value


def _pod_runtime(env: Mapping[str, str], prefix: str, image: str, openshift: bool) -> PodRuntime:
    pull = env.get(f"{prefix}IMAGE_PULL_POLICY", "IfNotPresent")
    if pull not in _PULL_POLICIES:
        raise SettingsError(f"{prefix}IMAGE_PULL_POLICY must be one of "
                            f"{', '.join(sorted(_PULL_POLICIES))}, not {pull!r}")
    secrets = tuple(s.strip() for s in env.get(f"{prefix}IMAGE_PULL_SECRETS", "").split(",")
                    if s.strip())
    return PodRuntime(
        image=image, pull_policy=pull,
        resources=_json_map(env, f"{prefix}RESOURCES", DEFAULT_RESOURCES),
        security_context=_json_map(env, f"{prefix}SECURITY_CONTEXT", _restricted(openshift)),
        image_pull_secrets=secrets,
    )


def scheduler_image(override: str | None, tag: str | None, digest: str | None,
                    cluster_version: str) -> str:
    """registry.k8s.io/kube-scheduler:<cluster version>, unless a tag or digest is pinned."""
    if override:
        return override
    if digest:
        return f"{SCHEDULER_REPOSITORY}@{digest}"
    # A cluster reports e.g. v1.36.3 or v1.36.3-gke.100; the upstream image has the plain tag.
    return f"{SCHEDULER_REPOSITORY}:{tag or cluster_version.split('-')[0].split('+')[0]}"


def load(env: Mapping[str, str] = os.environ) -> RuntimeSettings:
    openshift = env.get("COMPACTION_OPENSHIFT", "false").lower() in ("1", "true", "yes")
    desched = _pod_runtime(env, "COMPACTION_DESCHEDULER_",
                           env.get("COMPACTION_DESCHEDULER_IMAGE", DESCHEDULER_IMAGE), openshift)
    tag, digest = env.get("COMPACTION_SCHEDULER_IMAGE_TAG"), env.get(
        "COMPACTION_SCHEDULER_IMAGE_DIGEST")
    if tag and digest:
        raise SettingsError("set COMPACTION_SCHEDULER_IMAGE_TAG or _DIGEST, not both")
    override = env.get("COMPACTION_SCHEDULER_IMAGE") or (
        scheduler_image(None, tag, digest, "") if tag or digest else None)
    sched = _pod_runtime(env, "COMPACTION_SCHEDULER_", override or SCHEDULER_REPOSITORY,
                         openshift)
    return RuntimeSettings(descheduler=desched, scheduler=sched,
                           scheduler_image_override=override, openshift=openshift)
