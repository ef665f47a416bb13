"""Every name that several parts of Compactor must agree on (docs/architecture.md, "Names",
lists them)."""

from __future__ import annotations

from typing import Final

GROUP: Final = "compactor.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
POLICY_KIND: Final = "ClusterCompactionPolicy"
POLICY_PLURAL: Final = "clustercompactionpolicies"
NAMESPACED_POLICY_KIND: Final = "CompactionPolicy"
NAMESPACED_POLICY_PLURAL: Final = "compactionpolicies"
POLICY_KINDS: Final = (POLICY_KIND, NAMESPACED_POLICY_KIND)
# The cluster-scoped singleton that ranks policy types; only this name is accepted.
EVALUATION_KIND: Final = "PolicyEvaluation"
EVALUATION_PLURAL: Final = "policyevaluations"
EVALUATION_NAME: Final = "policy-evaluation"
# Resource policies: fixed requests and limits per container, namespaced and cluster-scoped.
STATIC_POLICY_KIND: Final = "StaticPolicy"
STATIC_POLICY_PLURAL: Final = "staticpolicies"
CLUSTER_STATIC_POLICY_KIND: Final = "ClusterStaticPolicy"
CLUSTER_STATIC_POLICY_PLURAL: Final = "clusterstaticpolicies"
STATIC_POLICY_KINDS: Final = (CLUSTER_STATIC_POLICY_KIND, STATIC_POLICY_KIND)

# The default install namespace; each component reads the one it runs in from the downward
# API (the webhook's Service namespace, the controller's COMPACTOR_NAMESPACE).
INSTALL_NAMESPACE: Final = "compactor-system"


def protected_namespaces(install_namespace: str) -> frozenset[str]:
    """Namespaces whose Pods Compactor never patches, re-admits or evicts: kube-system and
    the one it is installed in, where its own Pods run."""
    return frozenset({"kube-system", install_namespace})


# Those of a default install.
PROTECTED_NAMESPACES: Final = protected_namespaces(INSTALL_NAMESPACE)

POLICY_LABEL: Final = "compactor.dev/policy"
SUPPRESSED_LABEL: Final = "compactor.dev/suppressed"
IGNORE_LABEL: Final = "compactor.dev/ignore"
PROTECTED_LABEL: Final = "compactor.dev/protected"
# The drain taint the planner puts on the nodes it empties (value: the policy, effect
# PreferNoSchedule), and the label it puts on the Pods of those nodes that its policy's
# descheduler may evict (value: the policy).
DRAIN_TAINT: Final = "compactor.dev/drain"
DRAINING_LABEL: Final = "compactor.dev/draining"
# On a Pod marked draining: the node the plan sends it to, against which its replacement's
# landing is judged.
PLANNED_NODE_ANNOTATION: Final = "compactor.dev/planned-node"
# The kind of the Pod's workload, kept on managed Pods: the descheduler's eviction selector
# admits only the kinds the eviction table allows.
WORKLOAD_KIND_LABEL: Final = "compactor.dev/workload-kind"
INTENT_ANNOTATION: Final = "compactor.dev/intent"
# The resource plan the static policies compose for a workload (on its metadata), and on each
# Pod the webhook resized under it, the plan's hash.
RESOURCES_ANNOTATION: Final = "compactor.dev/resources"
RESOURCES_HASH_ANNOTATION: Final = "compactor.dev/resources-hash"
# Loop-detection state of the runtime hook, on the workload (so a restart forgets nothing).
CONVERGENCE_ANNOTATION: Final = "compactor.dev/convergence"
# What the controller writes on workload metadata, and so what the Deployment controller
# copies onto ReplicaSets (where the controller removes copies that went stale).
# A workload's own limit on Compactor's evictions of its Pods, set by its owner ("1/1h": at
# most one per hour; compaction.eviction_budget), and the evictions Compactor counts against
# it, written by the controller (so a restart forgets none).
EVICTION_BUDGET_ANNOTATION: Final = "compactor.dev/eviction-budget"
EVICTIONS_ANNOTATION: Final = "compactor.dev/evictions"
WORKLOAD_ANNOTATIONS: Final = (INTENT_ANNOTATION, CONVERGENCE_ANNOTATION,
                               RESOURCES_ANNOTATION, EVICTIONS_ANNOTATION)
MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE: Final = "compactor"

MANAGED_SCHEDULER: Final = "compactor-scheduler"
# Schedulers a Pod keeps when it names one at admission, by default (a setting of both the
# webhook and the controller): the KAI GPU scheduler takes precedence over compaction.
EXEMPT_SCHEDULERS: Final = frozenset({"kai-scheduler"})
DEFAULT_SCHEDULER: Final = "default-scheduler"
SCHEDULER_CONFIGMAP: Final = "compactor-scheduler-config"
DESCHEDULER_PREFIX: Final = "compactor-descheduler-"

# CronJob names may be at most 52 characters; the descheduler CronJob is named after the
# policy's id (``compaction.policy.Policy.id``), which is therefore at most this long.
MAX_POLICY_ID: Final = 52 - len(DESCHEDULER_PREFIX)

SAFE_TO_EVICT_ANNOTATION: Final = "cluster-autoscaler.kubernetes.io/safe-to-evict"
MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"
# Karpenter's opt-out: a Pod so annotated ("true") is never disrupted, so never evicted here.
DO_NOT_DISRUPT_ANNOTATION: Final = "karpenter.sh/do-not-disrupt"
# Pods at or below this priority are placeholder headroom (the overprovisioning convention is
# exactly -10): Compactor never evicts, re-admits, resizes or patches them.
PLACEHOLDER_PRIORITY: Final = -10


def descheduler_name(policy_id: str) -> str:
    """Name of the per-policy descheduler CronJob and ConfigMap."""
    return f"{DESCHEDULER_PREFIX}{policy_id}"
