"""The compaction scenario: a cluster spread out after a spike, plus things that must never move.

Parameterised: ``standard()`` is the demo's 12 nodes, ``small()`` the end-to-end test's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from compaction import names
from localcluster.cluster import Cluster, NodeShape
from localcluster.kube import Kube, path, wait_for

PAUSE = "registry.k8s.io/pause:3.10"
POLICY = "compact-production"
MANAGED_NAMESPACES = ("production", "batch")
NAMESPACES = (*MANAGED_NAMESPACES, "headroom", "kube-system")


@dataclass(frozen=True)
class App:
    namespace: str
    name: str
    replicas: int
    cpu: str
    memory: str
    kind: str = "Deployment"


@dataclass(frozen=True)
class Scenario:
    nodes: int
    shape: NodeShape = NodeShape(cpu="4", memory="16Gi", pods="110")
    apps: tuple[App, ...] = ()
    policy_spec: dict[str, Any] = field(default_factory=dict)

    @property
    def node_names(self) -> list[str]:
        return [f"node-{i:02d}" for i in range(self.nodes)]

    @property
    def expected_pods(self) -> int:
        """Every Pod of ``create``: the apps, pinned 1, payments 2, a node agent per node,
        dns 2 and the placeholders 2."""
        return sum(a.replicas for a in self.apps) + 1 + 2 + self.nodes + 2 + 2


def policy_spec(limits: int) -> dict[str, Any]:
    """Like the reference's first example, with setLabelsByEviction so that the Pods placed
    before the policy existed are re-admitted onto the compaction scheduler."""
    return {
        "scope": {"namespaceSelector": {"operator": "In", "values": list(MANAGED_NAMESPACES)},
                  "workloadTypes": ["Deployment", "StatefulSet"]},
        "enabled": True,
        "setLabelsByEviction": True,
        "scheduler": {"useManagedScheduler": True},
        "descheduler": {
            "enabled": True,
            "maxNoOfPodsToEvictPerNode": limits,
            "maxNoOfPodsToEvictPerNamespace": limits,
            "maxNoOfPodsToEvictTotal": limits,
            "highNodeUtilization": {"numberOfNodes": 0,
                                    "thresholds": {"cpu": 65, "memory": 65, "pods": 65}},
        },
    }


def standard() -> Scenario:
    return Scenario(nodes=12, policy_spec=policy_spec(1), apps=(
        App("production", "web", 10, "500m", "1Gi"),
        App("production", "api", 6, "750m", "2Gi"),
        App("production", "cache", 3, "1", "4Gi", kind="StatefulSet"),
        App("batch", "worker", 6, "1", "2Gi"),
        App("batch", "report", 5, "250m", "512Mi"),
    ))


def small() -> Scenario:
    return Scenario(nodes=6, policy_spec=policy_spec(2), apps=(
        App("production", "web", 5, "500m", "1Gi"),
        App("production", "cache", 2, "1", "3Gi", kind="StatefulSet"),
        App("batch", "worker", 3, "750m", "2Gi"),
    ))


def _template(labels: dict[str, str], cpu: str, memory: str,
              annotations: dict[str, str] | None = None,
              extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"labels": labels, "annotations": annotations or {}},
            "spec": {"terminationGracePeriodSeconds": 0, **(extra or {}), "containers": [{
                "name": "app", "image": PAUSE,
                "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}


def _workload(kind: str, name: str, replicas: int, template: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": replicas,
                            "selector": {"matchLabels": {"app": name}}, "template": template}
    if kind == "StatefulSet":
        spec.update(serviceName=name, podManagementPolicy="Parallel")
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


# Things that must never move, whatever the policy says.
PROTECTED = {
    ("production", "pinned"): "safe-to-evict: false",
    ("production", "payments"): "PodDisruptionBudget maxUnavailable: 0",
    ("production", "node-agent"): "DaemonSet",
    ("kube-system", "dns"): "kube-system",
    ("headroom", "capacity-reservation"): "placeholder, priority -10",
}


def create(cluster: Cluster, kube: Kube, scenario: Scenario, wait: bool = True) -> None:
    """The scenario's nodes and objects; then, unless ``wait`` is False, until every Pod is
    Running (by listing them: for a few hundred Pods; a large one waits on workload status)."""
    cluster.add_nodes(kube, scenario.node_names, scenario.shape)
    for ns in (*MANAGED_NAMESPACES, "headroom"):
        kube.ensure_namespace(ns, default_service_account=True)
    kube.ensure_namespace("kube-system", default_service_account=True)
    for app in scenario.apps:
        kube.create(path(app.kind.lower() + "s", app.namespace), _workload(
            app.kind, app.name, app.replicas,
            _template({"app": app.name}, app.cpu, app.memory)))
    kube.create(path("deployments", "production"), _workload("Deployment", "pinned", 1, _template(
        {"app": "pinned"}, "500m", "1Gi",
        {names.SAFE_TO_EVICT_ANNOTATION: "false"})))
    kube.create(path("deployments", "production"), _workload("Deployment", "payments", 2,
                                                             _template({"app": "payments"},
                                                                       "500m", "1Gi")))
    kube.create(path("poddisruptionbudgets", "production"), {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "payments"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "payments"}}}})
    ds = _workload("DaemonSet", "node-agent", 0, _template({"app": "node-agent"}, "50m", "64Mi"))
    del ds["spec"]["replicas"]
    kube.create(path("daemonsets", "production"), ds)
    kube.create(path("deployments", "kube-system"), _workload("Deployment", "dns", 2, _template(
        {"app": "dns"}, "100m", "128Mi")))
    kube.create(path("priorityclasses"), {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "overprovisioning"}, "value": -10, "globalDefault": False,
        "description": "Placeholder pods that hold spare capacity for real workloads."})
    kube.create(path("deployments", "headroom"), _workload(
        "Deployment", "capacity-reservation", 2, _template(
            {"app": "capacity-reservation"}, "1", "2Gi",
            extra={"priorityClassName": "overprovisioning"})))
    if wait:
        wait_for("every scenario Pod Running", lambda: settled(kube, scenario), timeout=180,
                 interval=0.5)


def settled(kube: Kube, scenario: Scenario) -> bool:
    """Every Pod of the scenario there and Running, none terminating. Counting matters: just
    after an eviction the old Pod is gone and its replacement not yet created."""
    live = 0
    for ns in NAMESPACES:
        for p in kube.items(path("pods", ns)):
            if p["metadata"].get("deletionTimestamp") or p["status"].get("phase") != "Running":
                return False
            live += 1
    return live == scenario.expected_pods


def spread_overrides(scenario: Scenario) -> dict[str, Any]:
    """The policy for a spread start that nothing re-admits: setLabelsByEviction false, and
    thresholds at 100 % so that every node may be a source (with the reference's 65 % the
    last full nodes stay, as the thresholds say they must)."""
    descheduler = {**scenario.policy_spec["descheduler"], "highNodeUtilization": {
        "numberOfNodes": 0, "thresholds": {"cpu": 100, "memory": 100, "pods": 100}}}
    return {"setLabelsByEviction": False, "descheduler": descheduler}


def apply_policy(kube: Kube, scenario: Scenario, **overrides: Any) -> None:
    spec = {**scenario.policy_spec, **overrides}
    kube.apply(path(names.POLICY_PLURAL, name=POLICY, api=f"apis/{names.API_VERSION}"),
               {"apiVersion": names.API_VERSION, "kind": names.POLICY_KIND,
                "metadata": {"name": POLICY}, "spec": spec})
