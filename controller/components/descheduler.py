"""Per-policy descheduler: DeschedulerPolicy (descheduler/v1alpha2) and its CronJob. Pure.

The planner decides which nodes to empty (the policy's ``highNodeUtilization`` thresholds and
``numberOfNodes`` are its gates) and taints them ``compactor.dev/drain=<policy>``; the one
plugin, ``RemovePodsViolatingNodeTaints`` (PreferNoSchedule included, that taint's key only, so
that a node shared by several policies' Pods is drained by each of their deschedulers), evicts
from them only Pods that the planner marked ``compactor.dev/draining=<policy>``, that carry
this policy's label and the label of a workload kind the eviction table allows
(``compaction.safety``), that are not suppressed and not protected (safe-to-evict "false" or
"on-completion", do-not-disrupt, or a toleration of the drain taint), ANDed with the policy's
own ``defaultEvictor.labelSelector``. That selector is the plugin's own ``labelSelector``,
which v0.36 applies before the evictor is asked: the DefaultEvictor's filter passes any Pod
annotated ``descheduler.alpha.kubernetes.io/evict`` before it checks anything, its own copy of
the selector included. ``HighNodeUtilization`` has no label selector of its own, so it is not
rendered. The descheduler itself honours neither safe-to-evict nor do-not-disrupt, so the
controller marks such Pods ``compactor.dev/protected=true`` and the selector excludes them.
Placeholders never carry the policy label. Every key follows the v0.36 Go types' JSON tags
(the integration suite decodes the rendered policy strictly with them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import yaml

from compaction import names
from compaction.descheduler_scope import DeschedulerScope
from compaction.policy import Policy
from compaction.selector import LabelSelector, Operator, Requirement
from controller.components.labels import managed_labels, policy_owner
from controller.components.pod_settings import PodRuntime
from controller.snapshot.owner import OwnerInfo

SERVICE_ACCOUNT: Final = "compactor-descheduler"
# Every namespace carries its own name under this label (the API server sets it).
NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"
POLICY_KEY: Final = "policy.yaml"
_MOUNT: Final = "/policy-dir"


def eviction_selector(policy: Policy) -> LabelSelector:
    """The policy's descheduler scope (``compaction.descheduler_scope``), narrowed to the Pods
    the planner marked for its drains: the taint plugin's own label selector, which no Pod
    annotation passes, and the evictor's too."""
    return DeschedulerScope.of(policy).selector(
        Requirement(names.DRAINING_LABEL, Operator.IN, (policy.id,)))


def _selector_object(selector: LabelSelector) -> dict[str, Any]:
    exprs = []
    for r in selector.requirements:
        expr: dict[str, Any] = {"key": r.key, "operator": r.operator.value}
        if r.values:
            expr["values"] = sorted(r.values)
        exprs.append(expr)
    return {"matchExpressions": exprs}


def _protections(policy: Policy) -> dict[str, list[str]]:
    ev = policy.descheduler.default_evictor
    disabled = [name for name, allowed in (
        ("PodsWithLocalStorage", ev.evict_local_storage_pods),
        ("DaemonSetPods", ev.evict_daemon_set_pods),
        ("SystemCriticalPods", ev.evict_system_critical_pods),
    ) if allowed]
    out: dict[str, list[str]] = {}
    if disabled:
        out["defaultDisabled"] = disabled
    if ev.ignore_pvc_pods:
        out["extraEnabled"] = ["PodsWithPVC"]
    return out


def node_pool(policy: Policy, node_labels: Mapping[str, Iterable[str]]) -> LabelSelector:
    """``descheduler.nodeSelector`` with its ``*`` patterns expanded against the label values
    seen on nodes (a pattern matching none makes a selector that matches no node)."""
    return policy.descheduler.node_selector.expand_wildcards(node_labels)


def render_descheduler_policy(policy: Policy, node_labels: Mapping[str, Iterable[str]],
                              namespace: str = names.INSTALL_NAMESPACE) -> dict[str, Any]:
    """The DeschedulerPolicy for one policy; ``node_labels`` are the label values seen on nodes,
    against which ``*`` patterns in ``descheduler.nodeSelector`` are expanded. ``namespace``:
    Compactor's own, never evicted from, like kube-system."""
    d = policy.descheduler
    node_selector = node_pool(policy, node_labels).render()
    scope = eviction_selector(policy)
    evictor: dict[str, Any] = {
        "nodeFit": d.default_evictor.node_fit,
        "labelSelector": _selector_object(scope),
    }
    if policy.namespace:
        # A CompactionPolicy's descheduler evicts in its own namespace only, whatever labels
        # Pods elsewhere carry.
        evictor["namespaceLabelSelector"] = _selector_object(LabelSelector((Requirement(
            NAMESPACE_NAME_LABEL, Operator.IN, (policy.namespace,)),)))
    if node_selector:
        # nodeFit lists candidate nodes itself, with this selector only: without it a Pod of
        # the pool "fits" on any node of the cluster.
        evictor["nodeSelector"] = node_selector
    protections = _protections(policy)
    if protections:
        evictor["podProtections"] = protections
    doc: dict[str, Any] = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
    }
    if node_selector:
        doc["nodeSelector"] = node_selector
    doc.update({
        "maxNoOfPodsToEvictPerNode": d.max_pods_to_evict_per_node,
        "maxNoOfPodsToEvictPerNamespace": d.max_pods_to_evict_per_namespace,
        "maxNoOfPodsToEvictTotal": d.max_pods_to_evict_total,
        "profiles": [{
            "name": f"compactor-{policy.id}",
            "pluginConfig": [
                {"name": "DefaultEvictor", "args": evictor},
                {"name": "RemovePodsViolatingNodeTaints", "args": {
                    "includePreferNoSchedule": True,
                    # The key only: a node that holds Pods of several policies carries one
                    # drain taint, and each policy's descheduler evicts its own Pods there
                    # (the draining label of the selector says which).
                    "includedTaints": [names.DRAIN_TAINT],
                    "namespaces": _namespaces(policy, namespace),
                    # Applied before the evictor's filter, which lets a Pod with the evict
                    # annotation past its own copy of this selector.
                    "labelSelector": _selector_object(scope),
                }},
            ],
            # No balance plugin: HighNodeUtilization has no label selector, so the evict
            # annotation would take any Pod of its underutilized nodes. The planner applies
            # its thresholds and numberOfNodes when it chooses the nodes to taint.
            "plugins": {
                "filter": {"enabled": ["DefaultEvictor"]},
                "preevictionfilter": {"enabled": ["DefaultEvictor"]},
                "deschedule": {"enabled": ["RemovePodsViolatingNodeTaints"]},
            },
        }],
    })
    return doc


def _namespaces(policy: Policy, install_namespace: str) -> dict[str, list[str]]:
    if policy.namespace:
        return {"include": [policy.namespace]}
    return {"exclude": sorted(names.protected_namespaces(install_namespace))}


def _metadata(policy: Policy, namespace: str) -> dict[str, Any]:
    """Named and labelled by the policy's id. A cluster policy owns its objects (they go
    with it); a namespaced one cannot own objects in another namespace, so the controller
    deletes them when the policy goes."""
    meta: dict[str, Any] = {"name": names.descheduler_name(policy.id), "namespace": namespace,
                            "labels": managed_labels("descheduler", policy.id)}
    if not policy.namespace:
        meta["ownerReferences"] = [policy_owner(policy.name, policy.uid)]
    return meta


def descheduler_configmap(policy: Policy, policy_doc: Mapping[str, Any],
                          namespace: str = names.INSTALL_NAMESPACE) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": _metadata(policy, namespace),
        "data": {POLICY_KEY: yaml.safe_dump(dict(policy_doc), sort_keys=False)},
    }


def descheduler_cronjob(policy: Policy, runtime: PodRuntime, suspend: bool,
                        namespace: str = names.INSTALL_NAMESPACE) -> dict[str, Any]:
    name = names.descheduler_name(policy.id)
    labels = managed_labels("descheduler", policy.id)
    pod_spec = runtime.pod_spec({
        "name": "descheduler", "image": runtime.image,
        # One run per Job: no --descheduling-interval, so the process exits when done.
        "command": ["/bin/descheduler", f"--policy-config-file={_MOUNT}/{POLICY_KEY}", "--v=3"],
    }, SERVICE_ACCOUNT, name, _MOUNT, restartPolicy="Never")
    return {
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {**_metadata(policy, namespace),
                     "annotations": runtime.scan_skips(runtime.image)},
        "spec": {
            "schedule": policy.descheduler.interval,
            "concurrencyPolicy": "Forbid",
            "suspend": suspend,
            "successfulJobsHistoryLimit": 1,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {"spec": {
                "backoffLimit": 0,
                "activeDeadlineSeconds": 600,
                "ttlSecondsAfterFinished": 3600,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": pod_spec,
                },
            }},
        },
    }


def failed_run(jobs: Iterable[OwnerInfo], namespace: str, cronjob: str) -> OwnerInfo | None:
    """The CronJob's newest finished Job (of its schedule, or made from it by hand with
    ``kubectl create job --from``), when that Job failed: a run that cannot do its work (a
    permission missing, a bad image) ends as a failed Job, and the policy's status must say so
    until a later run succeeds."""
    finished = [j for j in jobs if j.kind == "Job" and j.namespace == namespace
                and j.controller == ("CronJob", cronjob) and (j.complete or j.failure)]
    if not finished:
        return None
    last = max(finished, key=lambda j: (j.created is not None, j.created, j.name))
    return last if last.failure else None
