"""The contenders, each as its users run it, and how each is started on a restored cluster.

Every arm has Karpenter (the kwok provider) removing nodes; what differs is its consolidation
policy and what moves Pods beside it. Karpenter's own settings are its defaults
(``consolidateAfter: 0s``, a budget of 10 % of nodes) but where an arm says otherwise. The
descheduler of the recipe and of Compactor runs at one cadence a user may set (every 2 minutes,
as the chart's CronJob would, its first run half a period in); Compactor's product defaults
(every 30 minutes, one eviction a run, thresholds 25/25/100) are an arm of their own.
"""

from __future__ import annotations

import enum
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import yaml

from compaction import names
from controller.components.scheduler import render_scheduler_config
from localcluster.cluster.control_plane import Cluster
from localcluster.cluster.karpenter import Consolidation, Karpenter
from localcluster.cluster.kube import Kube
from localcluster.cluster.process import free_port
from localcluster.cluster.stack import CompactorStack, evicted_pods, local_scheduler_config
from localcluster.demo.scenario import POLICY, TeamPolicy

CADENCE: Final = 120.0  # seconds between descheduler runs a user may set
DEFAULT_CADENCE: Final = 1800.0  # the product's "*/30 * * * *"
# The eviction limits of a race policy, the recipe's too (untuned: a user's first choice).
LIMITS: Final = {"maxNoOfPodsToEvictPerNode": 5, "maxNoOfPodsToEvictPerNamespace": 10,
                 "maxNoOfPodsToEvictTotal": 10}
# Below it in CPU, memory and Pods a node is underutilized: a source of moves. The demo's
# 65 by default; ``--thresholds`` sets another for Compactor and the recipe alike, chosen on
# seeds left out of the reported ones.
THRESHOLD: Final = 65
APP_NAMESPACES: Final = ("production", "batch")


class Mover(enum.StrEnum):
    """What moves Pods beside Karpenter."""

    NOTHING = "nothing"
    ADMISSION = "compactor-admission"  # new Pods to the compaction scheduler, nothing evicts
    IN_PLACE = "compactor-in-place"  # setLabelsByEviction false: only the drains evict
    BY_EVICTION = "compactor-by-eviction"  # true: the runtime hook re-admits too
    DEFAULTS = "compactor-defaults"  # the product's defaults
    RECIPE = "recipe"  # HighNodeUtilization + Compactor's scheduler profile as the default


@dataclass(frozen=True)
class Arm:
    name: str
    consolidation: Consolidation
    mover: Mover = Mover.NOTHING

    @property
    def compactor(self) -> bool:
        return self.mover.value.startswith("compactor")

    @property
    def cadence(self) -> float | None:
        if self.mover in (Mover.IN_PLACE, Mover.BY_EVICTION, Mover.RECIPE):
            return CADENCE
        return DEFAULT_CADENCE if self.mover is Mover.DEFAULTS else None


UNDERUTILIZED = Consolidation("WhenEmptyOrUnderutilized", "0s", budget=None)
EMPTY = Consolidation("WhenEmpty", "0s", budget=None)
ARMS: Final = (
    Arm("karpenter", UNDERUTILIZED),
    Arm("karpenter-balanced", Consolidation("Balanced", "0s", budget=None)),
    Arm("karpenter+admission", UNDERUTILIZED, Mover.ADMISSION),
    Arm("recipe", EMPTY, Mover.RECIPE),
    Arm("compactor-in-place", EMPTY, Mover.IN_PLACE),
    Arm("compactor-by-eviction", EMPTY, Mover.BY_EVICTION),
    Arm("compactor-defaults", EMPTY, Mover.DEFAULTS),
    Arm("control", EMPTY),
)


def arm(name: str) -> Arm:
    return next(a for a in ARMS if a.name == name)


def thresholds(percent: int) -> dict[str, int]:
    return {"cpu": percent, "memory": percent, "pods": percent}


def policy_spec(mover: Mover, threshold: int = THRESHOLD) -> dict[str, Any]:
    """The ClusterCompactionPolicy of a Compactor arm."""
    spec: dict[str, Any] = {
        "scope": {"namespaceSelector": {"operator": "In", "values": list(APP_NAMESPACES)},
                  "workloadTypes": ["Deployment", "StatefulSet"]},
        "enabled": True, "scheduler": {"useManagedScheduler": True}}
    if mover is Mover.DEFAULTS:
        return spec
    spec["setLabelsByEviction"] = mover is Mover.BY_EVICTION
    if mover is Mover.ADMISSION:
        spec["descheduler"] = {"enabled": False}
        return spec
    spec["descheduler"] = {"enabled": True, "interval": "*/2 * * * *", **LIMITS,
                           "maxDrainingNodes": 2,
                           "highNodeUtilization": {"numberOfNodes": 0,
                                                   "thresholds": thresholds(threshold)}}
    return spec


def recipe_policy(threshold: int = THRESHOLD) -> dict[str, Any]:
    """The recipe's DeschedulerPolicy: HighNodeUtilization at the race's thresholds and
    limits, the default evictor honouring ``prefer-no-eviction`` as Mandatory."""
    return {
        "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", **LIMITS,
        "profiles": [{"name": "recipe", "pluginConfig": [
            {"name": "DefaultEvictor", "args": {"nodeFit": True,
                                                "noEvictionPolicy": "Mandatory"}},
            {"name": "HighNodeUtilization", "args": {
                "thresholds": thresholds(threshold),
                "evictableNamespaces": {"exclude": ["kube-system"]}}}],
            "plugins": {"balance": {"enabled": ["HighNodeUtilization"]}}}]}


def recipe_scheduler_config(kubeconfig: str) -> dict[str, Any]:
    """Compactor's scheduler profile as the default scheduler: MostAllocated, no balanced
    allocation, no default topology spread; no extender, as a recipe has no drain plan."""
    config = local_scheduler_config(render_scheduler_config(), kubeconfig)
    config["leaderElection"] = {"leaderElect": False}
    config["profiles"][0]["schedulerName"] = "default-scheduler"
    return config


def begin(a: Arm, cluster: Cluster, kube: Kube, karpenter: Karpenter,
          stack: CompactorStack | None, threshold: int = THRESHOLD) -> Callable[[], int]:
    """Set the arm going; returns one descheduler run (its evictions), if the arm has one."""
    karpenter.set_pool(kube, a.consolidation)
    if a.mover is Mover.RECIPE:
        return _recipe(cluster, threshold)
    if not a.compactor:
        return lambda: 0
    assert stack is not None
    team = TeamPolicy(POLICY, policy_spec(a.mover, threshold))
    kube.apply(team.path, {"apiVersion": names.API_VERSION, "kind": team.kind,
                           "metadata": {"name": team.name}, "spec": team.spec})
    stack.start_scheduler()
    return lambda: len(stack.run_descheduler(team.id).evicted)


def _recipe(cluster: Cluster, threshold: int) -> Callable[[], int]:
    old = cluster.process("kube-scheduler")
    old.stop()
    cluster.processes.remove(old)
    config = cluster.dir / "recipe-scheduler.yaml"
    config.write_text(yaml.safe_dump(recipe_scheduler_config(str(cluster.kubeconfig))))
    cluster.start_scheduler(name="kube-scheduler-recipe", config=config)
    policy = cluster.dir / "recipe-descheduler.yaml"
    policy.write_text(yaml.safe_dump(recipe_policy(threshold)))

    def run() -> int:
        out = subprocess.run(
            [str(cluster.bin / "descheduler"), f"--kubeconfig={cluster.kubeconfig}",
             f"--policy-config-file={policy}", "--v=3", "--bind-address=127.0.0.1",
             f"--secure-port={free_port()}", f"--cert-dir={cluster.dir / 'descheduler-certs'}"],
            capture_output=True, text=True, timeout=300, check=False)
        log = out.stdout + out.stderr
        with (cluster.dir / "logs" / "recipe-descheduler.log").open("a") as f:
            f.write(log)
        return len(evicted_pods(log))
    return run

