"""The compaction scheduler: a real kube-scheduler with one MostAllocated profile (pure)."""

from __future__ import annotations

from typing import Any, Final

import yaml

from compaction import names
from controller.components.labels import component_selector, managed_labels
from controller.components.pod_settings import PodRuntime

SERVICE_ACCOUNT: Final = "compactor-scheduler"
DEPLOYMENT: Final = "compactor-scheduler"
CONFIG_KEY: Final = "config.yaml"
# The labels that select the compaction scheduler's Pods, read back to see why one cannot start.
POD_SELECTOR: Final = component_selector("scheduler")
_MOUNT: Final = "/etc/compactor-scheduler"
# Above the sum of every other score's weight in the profile (NodeResourcesFit 1,
# InterPodAffinity 2, NodeAffinity 2, PodTopologySpread 2, VolumeBinding 1, the extender 1).
TAINT_WEIGHT: Final = 20
# The extender's top score (10) counts 10 × 10 × this: 100, as much as MostAllocated's whole
# range, so the planned node wins among nodes with as many soft taints, and only there.
EXTENDER_WEIGHT: Final = 1
EXTENDER_PORT: Final = 10262  # webhook.extender_server.PORT, on the Pod's loopback


def extender(url_prefix: str) -> dict[str, Any]:
    """The extender beside kube-scheduler in its Pod (``webhook.extender_server``): the node the
    drain plan sent a replaced Pod to scores first, so that the scheduler's choice among equal
    scores is the plan's. Ignorable: an extender down or slow leaves the profile's own scores,
    and no Pod waits on it for longer than its timeout."""
    return {"urlPrefix": url_prefix, "prioritizeVerb": "prioritize",
            "weight": EXTENDER_WEIGHT, "enableHTTPS": False, "httpTimeout": "2s",
            "nodeCacheCapable": True, "ignorable": True}


def render_scheduler_config(namespace: str = names.INSTALL_NAMESPACE,
                            kubeconfig: str | None = None,
                            with_extender: bool = True) -> dict[str, Any]:
    """KubeSchedulerConfiguration v1 with its own lease, so it never contends with the default
    scheduler for kube-system/kube-scheduler; and the extender in its Pod, when it has one."""
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {
            "leaderElect": True,
            "resourceNamespace": namespace,
            "resourceName": names.MANAGED_SCHEDULER,
        },
        # No /debug/pprof on its port (the --profiling flag is ignored beside --config).
        "enableProfiling": False,
        # Every feasible node is scored, as the planner's simulation scores them all: above
        # 100 nodes kube-scheduler would otherwise stop at a sample and pick among those.
        "percentageOfNodesToScore": 100,
        "profiles": [{
            "schedulerName": names.MANAGED_SCHEDULER,
            # Scores that pull the other way would undo the packing: balanced allocation
            # prefers emptier nodes for lopsided Pods, and the default (system) topology
            # spread scatters replicas across nodes. A Pod's own spread constraints still apply.
            # A node the planner drains carries a PreferNoSchedule taint: TaintToleration's
            # weight makes it lose to any node without one, however full (MostAllocated
            # scores at most 100 at weight 1; the taint costs 100 at this weight each).
            # ImageLocality would draw a Pod back to the nodes that have its image, the node it
            # left among them: it serves no packing, and the simulation does not score it.
            "plugins": {"score": {
                "enabled": [{"name": "TaintToleration", "weight": TAINT_WEIGHT}],
                "disabled": [{"name": "NodeResourcesBalancedAllocation"},
                             {"name": "ImageLocality"}]}},
            "pluginConfig": [
                {"name": "NodeResourcesFit", "args": {"scoringStrategy": {
                    "type": "MostAllocated",
                    "resources": [{"name": "cpu", "weight": 1},
                                  {"name": "memory", "weight": 1}],
                }}},
                {"name": "PodTopologySpread", "args": {"defaultingType": "List",
                                                       "defaultConstraints": []}},
            ],
        }],
    }
    if with_extender:
        config["extenders"] = [extender(f"http://127.0.0.1:{EXTENDER_PORT}")]
    if kubeconfig:
        config["clientConnection"] = {"kubeconfig": kubeconfig}
    return config


def scheduler_configmap(namespace: str = names.INSTALL_NAMESPACE,
                        with_extender: bool = True) -> dict[str, Any]:
    config = render_scheduler_config(namespace, with_extender=with_extender)
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": names.SCHEDULER_CONFIGMAP, "namespace": namespace,
                     "labels": managed_labels("scheduler")},
        "data": {CONFIG_KEY: yaml.safe_dump(config, sort_keys=False)},
    }


def scheduler_deployment(runtime: PodRuntime, image: str, config_hash: str,
                         namespace: str = names.INSTALL_NAMESPACE,
                         extender_image: str | None = None) -> dict[str, Any]:
    """kube-scheduler, and beside it, from Compactor's own image, its extender."""
    labels = managed_labels("scheduler")
    spec = runtime.pod_spec({
        "name": "kube-scheduler", "image": image,
        "command": ["kube-scheduler", f"--config={_MOUNT}/{CONFIG_KEY}", "--v=2"],
        "ports": [{"name": "https", "containerPort": 10259}],
        "livenessProbe": {"httpGet": {"path": "/livez", "port": 10259, "scheme": "HTTPS"},
                          "initialDelaySeconds": 15},
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": 10259, "scheme": "HTTPS"}},
    }, SERVICE_ACCOUNT, names.SCHEDULER_CONFIGMAP, _MOUNT)
    extra = {
        "CKV_K8S_114": "profiling is off in its config file (enableProfiling: false), "
                       "which --profiling cannot change beside --config",
        "CKV_K8S_115": "the kubelet probes /livez and /readyz at the Pod's address; "
                       "127.0.0.1 suits host-network control-plane Pods only",
    }
    if extender_image:
        # The extender's command and port, nothing else of its own: the scheduler's settings.
        (scheduler,) = spec["containers"]
        spec["containers"].append({
            "name": "extender", "image": extender_image, "command": ["compactor-extender"],
            "env": [{"name": "COMPACTOR_EXTENDER_PORT", "value": str(EXTENDER_PORT)}],
            "imagePullPolicy": runtime.pull_policy, "resources": dict(runtime.resources),
            "securityContext": dict(runtime.security_context),
            "volumeMounts": [m for m in scheduler["volumeMounts"] if m["name"] == "api-access"],
        })
        for check in ("CKV_K8S_8", "CKV_K8S_9"):
            extra[check] = ("the extender listens on the Pod's loopback alone, which no kubelet "
                            "probe reaches; kube-scheduler goes on without it (ignorable)")
        if "@" not in extender_image:
            extra["CKV_K8S_43"] = ("upstream's tag by default (the scheduler's follows the API "
                                   "server's version), and no image of Compactor's is "
                                   "published with a digest to pin (docs/install.md)")
    skips = runtime.scan_skips(image, extra)
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": DEPLOYMENT, "namespace": namespace, "labels": labels,
                     "annotations": skips},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(POD_SELECTOR)},
            "template": {
                # A config change rolls the scheduler: it reads its config only at start.
                "metadata": {"labels": labels,
                             "annotations": {"compactor.dev/config-hash": config_hash}},
                "spec": spec,
            },
        },
    }
