"""Runtime settings for the Pods the controller creates (scheduler and descheduler).

``controller.process.settings`` reads them from the environment (``COMPACTION_DESCHEDULER_*``,
``COMPACTION_SCHEDULER_*``, ``COMPACTION_OPENSHIFT``); this module holds what they mean.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

DESCHEDULER_IMAGE: Final = "registry.k8s.io/descheduler/descheduler:v0.36.0"
SCHEDULER_REPOSITORY: Final = "registry.k8s.io/kube-scheduler"

DEFAULT_RESOURCES: Final[Mapping[str, Any]] = {
    "requests": {"cpu": "50m", "memory": "64Mi"},
    "limits": {"memory": "256Mi"},
}
# Where in-cluster clients (client-go, kubernetes-asyncio) read the ServiceAccount's token, CA
# and namespace: the kubelet's own mount, which the Pods' projected volume takes the place of.
API_ACCESS_PATH: Final = "/var/run/secrets/kubernetes.io/serviceaccount"
# An hour: the kubelet renews the token at four fifths of that, and both components' clients
# read it again every minute. (The kubelet's own token is issued for a year by API servers that
# extend tokens for old clients.)
TOKEN_SECONDS: Final = 3600
_DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}")
# The fields of a container's security context that a Pod's may hold too.
_POD_LEVEL: Final = frozenset({"runAsNonRoot", "runAsUser", "runAsGroup", "seccompProfile",
                               "seLinuxOptions", "appArmorProfile", "windowsOptions"})


def _skip_annotations(reasons: Mapping[str, str]) -> dict[str, str]:
    """checkov reads ``checkov.io/skip<n>: <check>=<reason>`` in an object's metadata (and no
    comment in a Kubernetes manifest); docs/install.md lists every skip."""
    assert not any("=" in why for why in reasons.values()), "checkov splits on '='"
    return {f"checkov.io/skip{i}": f"{check}={why}"
            for i, (check, why) in enumerate(sorted(reasons.items()), 1)}


def api_access_volume() -> dict[str, Any]:
    """What the kubelet would mount for the API (token, CA, namespace), but with a token of
    ``TOKEN_SECONDS`` for the API server's own audience, bound to the Pod."""
    return {"name": "api-access", "projected": {"sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_SECONDS}},
        {"configMap": {"name": "kube-root-ca.crt",
                       "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
    ]}}


def is_digest(text: str) -> bool:
    return _DIGEST.fullmatch(text) is not None


def pinned(image: str, digest: str) -> str:
    """``image``'s repository at ``digest`` (its tag dropped: the digest alone is pulled)."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    repository = name[:colon] if colon > slash else name
    return f"{repository}@{digest}"


def restricted_security_context(openshift: bool) -> dict[str, Any]:
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


@dataclass(frozen=True)
class PodRuntime:
    image: str
    pull_policy: str = "IfNotPresent"
    resources: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_RESOURCES))
    security_context: Mapping[str, Any] = field(
        default_factory=lambda: restricted_security_context(False))
    image_pull_secrets: tuple[str, ...] = ()
    # Where the Pods may run: Compactor's own Pods never move, so one on a node of the pool it
    # compacts holds that node; these put them on nodes kept apart (a system pool, say).
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    affinity: Mapping[str, Any] = field(default_factory=dict)

    def pod_spec(self, container: Mapping[str, Any], service_account: str, config_map: str,
                 mount: str, **extra: Any) -> dict[str, Any]:
        """A Pod spec for one container that reads one ConfigMap, with these settings."""
        spec: dict[str, Any] = {
            "serviceAccountName": service_account,
            # Its token comes from the api-access volume, not the kubelet's mount.
            "automountServiceAccountToken": False,
            "priorityClassName": "system-cluster-critical",
            **extra,
            "containers": [{
                **container, "imagePullPolicy": self.pull_policy,
                "resources": dict(self.resources),
                "securityContext": dict(self.security_context),
                "volumeMounts": [
                    {"name": "config", "mountPath": mount, "readOnly": True},
                    {"name": "api-access", "mountPath": API_ACCESS_PATH, "readOnly": True}],
            }],
            "volumes": [{"name": "config", "configMap": {"name": config_map}},
                        api_access_volume()],
        }
        # Also at the Pod level, so that a container added later (a sidecar some admission
        # webhook injects) runs under the same user and seccomp profile.
        pod_context = {k: v for k, v in self.security_context.items() if k in _POD_LEVEL}
        if pod_context:
            spec["securityContext"] = pod_context
        if self.image_pull_secrets:
            spec["imagePullSecrets"] = [{"name": s} for s in self.image_pull_secrets]
        if self.node_selector:
            spec["nodeSelector"] = dict(self.node_selector)
        if self.tolerations:
            spec["tolerations"] = [dict(t) for t in self.tolerations]
        if self.affinity:
            spec["affinity"] = dict(self.affinity)
        return spec

    def scan_skips(self, image: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """Annotations that skip checkov's findings on a Pod of these settings running
        ``image`` that are by design, and ``extra`` (check id -> why)."""
        out: dict[str, str] = {}
        if "cpu" not in (self.resources.get("limits") or {}):
            out["CKV_K8S_11"] = ("no CPU limit: CFS throttling would only slow its work; "
                                 "set one with the resources setting")
        if self.pull_policy != "Always":
            out["CKV_K8S_15"] = (f"{self.pull_policy}: the image is a fixed tag or a digest, "
                                 "and Always makes every start depend on the registry")
        if "@" not in image:
            out["CKV_K8S_43"] = ("upstream's tag by default (the scheduler's follows the API "
                                 "server's version); the _IMAGE_DIGEST settings pin it, with "
                                 "the digest your registry serves (docs/install.md)")
        return _skip_annotations({**out, **(extra or {})})


@dataclass(frozen=True)
class RuntimeSettings:
    descheduler: PodRuntime = PodRuntime(DESCHEDULER_IMAGE)
    scheduler: PodRuntime = PodRuntime(SCHEDULER_REPOSITORY)
    # None: derive the tag from the API server's version; else a full image reference.
    scheduler_image_override: str | None = None
    # Compactor's own image, for the extender beside the scheduler; None: no extender.
    extender_image: str | None = None
    openshift: bool = False


def scheduler_image(override: str | None, tag: str | None, digest: str | None,
                    cluster_version: str) -> str:
    """registry.k8s.io/kube-scheduler:<cluster version>, unless a tag or digest is pinned."""
    if override:
        return override
    if digest:
        return pinned(SCHEDULER_REPOSITORY, digest)
    # A cluster reports e.g. v1.36.3 or v1.36.3-gke.100; the upstream image has the plain tag.
    return f"{SCHEDULER_REPOSITORY}:{tag or cluster_version.split('-')[0].split('+')[0]}"
