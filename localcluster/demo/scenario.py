"""The compaction scenario: a cluster spread out after a spike, plus things that must never move.

Parameterised: ``standard()`` is the demo's 12 nodes, ``small()`` the end-to-end test's;
``two_teams()`` and ``three_teams()`` put several teams' policies on shared nodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from compaction import names
from compaction.policy import policy_id
from localcluster.cluster.control_plane import KWOK_ANNOTATION, Cluster, NodeShape
from localcluster.cluster.kube import Kube, path, wait_for
from localcluster.node.cluster import KWOK_TOLERATION

PAUSE = "registry.k8s.io/pause:3.10"
POLICY = "compact-production"
# Namespaces whose Pods a scenario's policies manage; ``analytics`` only in the teams' ones.
MANAGED_NAMESPACES = ("production", "batch", "analytics")
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
class TeamPolicy:
    """One of several policies on shared nodes: a ClusterCompactionPolicy (no namespace)
    or a team's CompactionPolicy in its namespace."""

    name: str
    spec: dict[str, Any]
    namespace: str = ""

    @property
    def id(self) -> str:
        return policy_id(self.namespace, self.name)

    @property
    def kind(self) -> str:
        return names.NAMESPACED_POLICY_KIND if self.namespace else names.POLICY_KIND

    @property
    def path(self) -> str:
        plural = names.NAMESPACED_POLICY_PLURAL if self.namespace else names.POLICY_PLURAL
        return path(plural, self.namespace or None, self.name, api=f"apis/{names.API_VERSION}")


@dataclass(frozen=True)
class Scenario:
    nodes: int
    shape: NodeShape = NodeShape(cpu="4", memory="16Gi", pods="110")
    apps: tuple[App, ...] = ()
    policy_spec: dict[str, Any] = field(default_factory=dict)
    # Several policies instead of the one ``POLICY`` with ``policy_spec``.
    teams: tuple[TeamPolicy, ...] = ()
    protected: bool = True  # create the things that must never move
    # Fields of every Pod template of the scenario (``on_kwok``'s toleration and selector).
    pod_spec: dict[str, Any] = field(default_factory=dict)

    @property
    def policies(self) -> tuple[TeamPolicy, ...]:
        return self.teams or (TeamPolicy(POLICY, self.policy_spec),)

    @property
    def node_names(self) -> list[str]:
        return [f"node-{i:02d}" for i in range(self.nodes)]

    @property
    def expected_pods(self) -> int:
        """Every Pod of ``create``: the apps and, with ``protected``, pinned 1, payments 2, a
        node agent per node, dns 2 and the placeholders 2."""
        return sum(a.replicas for a in self.apps) + (
            1 + 2 + self.nodes + 2 + 2 if self.protected else 0)


def policy_spec(limits: int, by_eviction: bool = False) -> dict[str, Any]:
    """Like the reference's first example. ``by_eviction``: setLabelsByEviction, so that the
    runtime hook re-admits the Pods placed before the policy existed onto the compaction
    scheduler; without it the plan's drains alone compact, and the report shows them."""
    return {
        "scope": {"namespaceSelector": {"operator": "In", "values": list(MANAGED_NAMESPACES)},
                  "workloadTypes": ["Deployment", "StatefulSet"]},
        "enabled": True,
        "setLabelsByEviction": by_eviction,
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


def standard(by_eviction: bool = False) -> Scenario:
    return Scenario(nodes=12, policy_spec=policy_spec(1, by_eviction), apps=(
        App("production", "web", 10, "500m", "1Gi"),
        App("production", "api", 6, "750m", "2Gi"),
        App("production", "cache", 3, "1", "4Gi", kind="StatefulSet"),
        App("batch", "worker", 6, "1", "2Gi"),
        App("batch", "report", 5, "250m", "512Mi"),
    ))


def small(by_eviction: bool = False) -> Scenario:
    return Scenario(nodes=6, policy_spec=policy_spec(2, by_eviction), apps=(
        App("production", "web", 5, "500m", "1Gi"),
        App("production", "cache", 2, "1", "3Gi", kind="StatefulSet"),
        App("batch", "worker", 3, "750m", "2Gi"),
    ))


def on_kwok(scenario: Scenario) -> Scenario:
    """The scenario beside a real node (``localcluster.node``): every Pod tolerates the kwok
    nodes' taint and selects them, so the real node runs Compactor's Pods and nothing else."""
    return replace(scenario, pod_spec={"tolerations": [KWOK_TOLERATION],
                                       "nodeSelector": {"type": "kwok"}})


def _team_spec(limits: int, namespaces: tuple[str, ...] = ()) -> dict[str, Any]:
    """``policy_spec`` for a team: a cluster policy over ``namespaces``, or (none given) a
    CompactionPolicy's, which covers its own namespace and may not name others."""
    spec = policy_spec(limits, by_eviction=True)
    scope = {k: v for k, v in spec["scope"].items() if k != "namespaceSelector"}
    if namespaces:
        scope["namespaceSelector"] = {"operator": "In", "values": list(namespaces)}
    return {**spec, "scope": scope}


def two_teams() -> Scenario:
    """Two ClusterCompactionPolicies, one per team's namespace, on four nodes that each run
    Pods of both teams; nothing else blocks, and nothing re-admits (the plan and the
    descheduler alone compact). Everything fits on one or two nodes."""
    def spec(ns: str) -> dict[str, Any]:
        base = _team_spec(2, (ns,))
        return {**base, "setLabelsByEviction": False, "descheduler": {
            **base["descheduler"], "highNodeUtilization": {
                "numberOfNodes": 0, "thresholds": {"cpu": 100, "memory": 100, "pods": 100}}}}
    return Scenario(nodes=4, protected=False, apps=(
        App("production", "web", 4, "500m", "1Gi"),
        App("batch", "worker", 4, "500m", "1Gi"),
    ), teams=(TeamPolicy("team-production", spec("production")),
              TeamPolicy("team-batch", spec("batch"))))


def three_teams() -> Scenario:
    """A cluster admin's policy over ``production`` and two namespace owners'
    CompactionPolicies in ``batch`` and ``analytics``, on eight shared nodes, with the
    things that must never move."""
    return Scenario(nodes=8, apps=(
        App("production", "web", 8, "500m", "1Gi"),
        App("production", "cache", 2, "1", "3Gi", kind="StatefulSet"),
        App("batch", "worker", 6, "500m", "1Gi"),
        App("analytics", "report", 6, "250m", "512Mi"),
    ), teams=(TeamPolicy("compact-production", _team_spec(2, ("production",))),
              TeamPolicy("batch-team", _team_spec(2), "batch"),
              TeamPolicy("analytics-team", _team_spec(2), "analytics")))


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


# Makes the scenario's nodes (an autoscaler's, say) instead of adding them, and names them.
Provision = Callable[[Kube, "Scenario"], list[str]]


def create(cluster: Cluster, kube: Kube, scenario: Scenario, wait: bool = True,
           provision: Provision | None = None) -> list[str]:
    """The scenario's nodes and objects; then, unless ``wait`` is False, until every Pod is
    Running (by listing them: for a few hundred Pods; a large one waits on workload status).
    Returns the nodes' names."""
    if provision is None:
        cluster.add_nodes(kube, scenario.node_names, scenario.shape)
        nodes = scenario.node_names
    else:
        nodes = provision(kube, scenario)
    for ns in (*MANAGED_NAMESPACES, "headroom"):
        kube.ensure_namespace(ns, default_service_account=True)
    kube.ensure_namespace("kube-system", default_service_account=True)
    for app in scenario.apps:
        kube.create(path(app.kind.lower() + "s", app.namespace), _workload(
            app.kind, app.name, app.replicas,
            _template({"app": app.name}, app.cpu, app.memory, extra=scenario.pod_spec)))
    if scenario.protected:
        _protected(kube, scenario.pod_spec)
    if wait:
        wait_for("every scenario Pod Running", lambda: settled(kube, scenario), timeout=180,
                 interval=0.5)
    return nodes


def _protected(kube: Kube, extra: dict[str, Any] | None = None) -> None:
    extra = extra or {}
    kube.create(path("deployments", "production"), _workload("Deployment", "pinned", 1, _template(
        {"app": "pinned"}, "500m", "1Gi",
        {names.SAFE_TO_EVICT_ANNOTATION: "false"}, extra)))
    kube.create(path("deployments", "production"), _workload("Deployment", "payments", 2,
                                                             _template({"app": "payments"},
                                                                       "500m", "1Gi",
                                                                       extra=extra)))
    kube.create(path("poddisruptionbudgets", "production"), {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "payments"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "payments"}}}})
    ds = _workload("DaemonSet", "node-agent", 0, _template({"app": "node-agent"}, "50m", "64Mi",
                                                           extra=extra))
    del ds["spec"]["replicas"]
    kube.create(path("daemonsets", "production"), ds)
    kube.create(path("deployments", "kube-system"), _workload("Deployment", "dns", 2, _template(
        {"app": "dns"}, "100m", "128Mi", extra=extra)))
    kube.create(path("priorityclasses"), {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "overprovisioning"}, "value": -10, "globalDefault": False,
        "description": "Placeholder pods that hold spare capacity for real workloads."})
    kube.create(path("deployments", "headroom"), _workload(
        "Deployment", "capacity-reservation", 2, _template(
            {"app": "capacity-reservation"}, "1", "2Gi",
            extra={**extra, "priorityClassName": "overprovisioning"})))


def settled(kube: Kube, scenario: Scenario) -> bool:
    """Every Pod of the scenario there and Running, none terminating. Counting matters: just
    after an eviction the old Pod is gone and its replacement not yet created. The node agent
    runs on every Ready kwok node there is: an autoscaler may have removed some (their agents
    go with them), or be adding one."""
    live, agents = 0, 0
    ready = {n["metadata"]["name"] for n in kube.items(path("nodes"))
             if not n["metadata"].get("deletionTimestamp") and _ready(n)
             and (n["metadata"].get("annotations") or {}).get(KWOK_ANNOTATION) == "fake"}
    for ns in NAMESPACES:
        for p in kube.items(path("pods", ns)):
            running = not p["metadata"].get("deletionTimestamp") and \
                p["status"].get("phase") == "Running"
            if p["metadata"].get("labels", {}).get("app") == "node-agent":
                agents += running and p["spec"].get("nodeName") in ready
                continue
            if not running:
                return False
            live += 1
    if not scenario.protected:
        return live == scenario.expected_pods
    return live == scenario.expected_pods - scenario.nodes and agents >= len(ready)


def _ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def spread_overrides(scenario: Scenario) -> dict[str, Any]:
    """The policy for a spread start that nothing re-admits: setLabelsByEviction false, and
    thresholds at 100 % so that every node may be a source (with the reference's 65 % the
    last full nodes stay, as the thresholds say they must)."""
    descheduler = {**scenario.policy_spec["descheduler"], "highNodeUtilization": {
        "numberOfNodes": 0, "thresholds": {"cpu": 100, "memory": 100, "pods": 100}}}
    return {"setLabelsByEviction": False, "descheduler": descheduler}


def apply_policy(kube: Kube, scenario: Scenario, **overrides: Any) -> None:
    """Every policy of the scenario, each with ``overrides`` over its spec."""
    for team in scenario.policies:
        meta: dict[str, Any] = {"name": team.name}
        if team.namespace:
            meta["namespace"] = team.namespace
        kube.apply(team.path, {"apiVersion": names.API_VERSION, "kind": team.kind,
                               "metadata": meta, "spec": {**team.spec, **overrides}})
