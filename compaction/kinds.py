"""Every API kind Compactor reads or writes: group, version, plural, and its REST paths.

One table for the webhook, the controller and the local cluster, so an Event's
``involvedObject.apiVersion``, an owner lookup and a watch all agree on where a kind lives.
Paths are built from quoted segments only: a name that came from an object (an owner
reference, say) can never add a query, a fragment or a ``..`` to a request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote

from compaction import names


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str  # "" for the core API
    version: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def base(self) -> str:
        return "/api/v1" if not self.group else f"/apis/{self.group}/{self.version}"

    def path(self, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> str:
        """``/apis/<g>/<v>[/namespaces/<ns>]/<plural>[/<name>[/<sub>]]``; no namespace on a
        namespaced kind means the cluster-wide collection."""
        parts = [self.base]
        if namespace is not None and self.namespaced:
            parts += ["namespaces", _segment(namespace)]
        parts.append(self.plural)
        if name is not None:
            parts.append(_segment(name))
            if subresource is not None:
                parts.append(_segment(subresource))
        return "/".join(parts)


_PLAIN: Final = re.compile(r"[A-Za-z0-9._~-]+")


def _segment(value: str) -> str:
    """One path segment, every reserved character escaped ('/', '?', '#', '%', '.' runs)."""
    if value in ("", ".", ".."):
        raise ValueError(f"{value!r} cannot be a path segment")
    if _PLAIN.fullmatch(value):
        return value  # a DNS name, as almost every name is: nothing to escape
    return quote(value, safe="")


_TABLE: Final = (
    Kind("Pod", "", "v1", "pods"),
    Kind("Namespace", "", "v1", "namespaces", namespaced=False),
    Kind("Node", "", "v1", "nodes", namespaced=False),
    Kind("ConfigMap", "", "v1", "configmaps"),
    Kind("Secret", "", "v1", "secrets"),
    Kind("Service", "", "v1", "services"),
    Kind("ServiceAccount", "", "v1", "serviceaccounts"),
    Kind("Event", "", "v1", "events"),
    Kind("Endpoints", "", "v1", "endpoints"),
    Kind("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims"),
    Kind("LimitRange", "", "v1", "limitranges"),
    Kind("Deployment", "apps", "v1", "deployments"),
    Kind("ReplicaSet", "apps", "v1", "replicasets"),
    Kind("StatefulSet", "apps", "v1", "statefulsets"),
    Kind("DaemonSet", "apps", "v1", "daemonsets"),
    Kind("Job", "batch", "v1", "jobs"),
    Kind("CronJob", "batch", "v1", "cronjobs"),
    Kind("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets"),
    Kind("Lease", "coordination.k8s.io", "v1", "leases"),
    Kind("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", namespaced=False),
    Kind("MutatingWebhookConfiguration", "admissionregistration.k8s.io", "v1",
         "mutatingwebhookconfigurations", namespaced=False),
    Kind("ValidatingAdmissionPolicy", "admissionregistration.k8s.io", "v1",
         "validatingadmissionpolicies", namespaced=False),
    Kind("ValidatingAdmissionPolicyBinding", "admissionregistration.k8s.io", "v1",
         "validatingadmissionpolicybindings", namespaced=False),
    Kind("CustomResourceDefinition", "apiextensions.k8s.io", "v1",
         "customresourcedefinitions", namespaced=False),
    Kind("ClusterRole", "rbac.authorization.k8s.io", "v1", "clusterroles", namespaced=False),
    Kind("ClusterRoleBinding", "rbac.authorization.k8s.io", "v1", "clusterrolebindings",
         namespaced=False),
    Kind("Role", "rbac.authorization.k8s.io", "v1", "roles"),
    Kind("RoleBinding", "rbac.authorization.k8s.io", "v1", "rolebindings"),
    Kind("SubjectAccessReview", "authorization.k8s.io", "v1", "subjectaccessreviews",
         namespaced=False),
    Kind("Rollout", "argoproj.io", "v1alpha1", "rollouts"),
    Kind("AnalysisRun", "argoproj.io", "v1alpha1", "analysisruns"),
    Kind("StrimziPodSet", "core.strimzi.io", "v1beta2", "strimzipodsets"),
    Kind("Model", "kubeai.org", "v1", "models"),
    Kind(names.POLICY_KIND, names.GROUP, names.VERSION, names.POLICY_PLURAL, namespaced=False),
    Kind(names.NAMESPACED_POLICY_KIND, names.GROUP, names.VERSION,
         names.NAMESPACED_POLICY_PLURAL),
    Kind(names.EVALUATION_KIND, names.GROUP, names.VERSION, names.EVALUATION_PLURAL,
         namespaced=False),
    Kind(names.STATIC_POLICY_KIND, names.GROUP, names.VERSION, names.STATIC_POLICY_PLURAL),
    Kind(names.CLUSTER_STATIC_POLICY_KIND, names.GROUP, names.VERSION,
         names.CLUSTER_STATIC_POLICY_PLURAL, namespaced=False),
)

KINDS: Final[Mapping[str, Kind]] = {k.kind: k for k in _TABLE}
_BY_PLURAL: Final[Mapping[str, Kind]] = {k.plural: k for k in _TABLE}


def kind(name: str) -> Kind:
    """The table's entry for a kind; KeyError for a kind Compactor does not use."""
    return KINDS[name]


def by_plural(plural: str) -> Kind:
    return _BY_PLURAL[plural]
