"""The chaos run's objects: its policies and Deployments, and what a compliant Pod is."""

from __future__ import annotations

from typing import Any

from compaction import names
from compaction.intent import Intent, parse_intent
from localcluster.chaos.reliability import Limits

LIMITS = Limits(per_node=2, per_namespace=2, total=2)
PAUSE = "registry.k8s.io/pause:3.10"
# The label of each node pool, and its NoSchedule taint with the pool as value: only the
# harness's workloads tolerate it, so that Compactor's own Pods (the scheduler's, the
# descheduler Jobs', which kwok pretends to run) keep to a node of their own and never hold a
# pool node the plan would free.
POOL_KEY = "chaos.compactor.test/pool"


def pool_taint(pool: str) -> dict[str, str]:
    return {"key": POOL_KEY, "value": pool, "effect": "NoSchedule"}


def policy_spec(namespace: str, hook: bool, descheduler: bool, *, window: str = "1m",
                threshold: int = 3, suppression: str = "1m",
                pool: str | None = None,
                evict_replacements_after: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "scope": {"namespaceSelector": {"operator": "In", "values": [namespace]},
                  "workloadTypes": ["Deployment"]},
        "setLabelsByEviction": hook, "scheduler": {"useManagedScheduler": True},
        "descheduler": {
            "enabled": descheduler, "maxNoOfPodsToEvictPerNode": LIMITS.per_node,
            "maxNoOfPodsToEvictPerNamespace": LIMITS.per_namespace,
            "maxNoOfPodsToEvictTotal": LIMITS.total, "loopDetectionWindow": window,
            "loopDetectionThreshold": threshold, "suppressionDuration": suppression,
            "highNodeUtilization": {"thresholds": {"cpu": 50, "memory": 50, "pods": 50}}}}
    if pool:
        spec["descheduler"]["nodeSelector"] = {"matchLabels": {POOL_KEY: pool}}
    if evict_replacements_after is not None:
        spec["descheduler"]["evictReplacementsAfter"] = evict_replacements_after
    return spec


def deployment(name: str, replicas: int, pool: str, cpu: str, memory: str,
               env: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name},
                                               "annotations": annotations},
                                  "spec": {"terminationGracePeriodSeconds": 0,
                                           "nodeSelector": {POOL_KEY: pool},
                                           "tolerations": [{**pool_taint(pool),
                                                            "operator": "Equal"}],
                                           "containers": [{
                                               "name": "app", "image": PAUSE,
                                               "env": [{"name": k, "value": v}
                                                       for k, v in env.items()],
                                               "resources": {"requests": {
                                                   "cpu": cpu, "memory": memory}}}]}}}}




def compliant(pod: dict[str, Any], intent: Intent, scheduler: bool) -> bool:
    """Admitted (or labelled) with the workload's intent: its labels, the intent annotation,
    and with ``scheduler`` the compaction scheduler too."""
    meta = pod["metadata"]
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    parsed = parse_intent(annotations.get(names.INTENT_ANNOTATION, ""))
    if any(labels.get(k) != v for k, v in intent.labels.items()) or parsed.intent is None \
            or parsed.intent.hash != intent.hash:
        return False
    return not scheduler or intent.scheduler_name is None or \
        pod["spec"].get("schedulerName") == intent.scheduler_name
