"""The one rule of what Compactor may evict (compaction.safety.eviction_hold), one case per
reason: the planner, the runtime hook and the descheduler config all read it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from compaction import names
from compaction.policy import DefaultEvictor
from compaction.safety import Hold, eviction_hold, untouched
from compaction.workload import WorkloadType
from controller.snapshot.pod import PodInfo

POD = PodInfo("shop", "web-1-a", "u1", owner=("ReplicaSet", "web-1"), node_name="n1",
              phase="Running")
DEPLOYMENT = WorkloadType.DEPLOYMENT

CASES: list[tuple[str, dict[str, Any], WorkloadType | None, Hold | None]] = [
    ("movable", {}, DEPLOYMENT, None),
    ("statefulset", {}, WorkloadType.STATEFUL_SET, None),
    ("kube-system", {"namespace": "kube-system"}, DEPLOYMENT, Hold.PROTECTED_NAMESPACE),
    ("compactor-system", {"namespace": "compactor-system"}, DEPLOYMENT,
     Hold.PROTECTED_NAMESPACE),
    ("mirror", {"annotations": {"kubernetes.io/config.mirror": "x"}}, DEPLOYMENT, Hold.MIRROR),
    ("placeholder", {"priority": -10}, DEPLOYMENT, Hold.PLACEHOLDER),
    ("below-placeholder", {"priority": -11}, DEPLOYMENT, Hold.PLACEHOLDER),
    ("bare", {"owner": None}, None, Hold.BARE_POD),
    ("no-workload", {}, None, Hold.KIND_NOT_EVICTED),
    ("job", {}, WorkloadType.JOB, Hold.KIND_NOT_EVICTED),
    ("daemonset", {}, WorkloadType.DAEMON_SET, Hold.KIND_NOT_EVICTED),
    ("safe-to-evict-false", {"annotations": {
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}}, DEPLOYMENT,
     Hold.SAFE_TO_EVICT),
    ("on-completion", {"annotations": {
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "on-completion"}}, DEPLOYMENT,
     Hold.SAFE_TO_EVICT),
    ("do-not-disrupt", {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}, DEPLOYMENT,
     Hold.DO_NOT_DISRUPT),
    ("do-not-disrupt-false", {"annotations": {"karpenter.sh/do-not-disrupt": "false"}},
     DEPLOYMENT, None),
    ("critical-class", {"priority_class_name": "system-node-critical"}, DEPLOYMENT,
     Hold.SYSTEM_CRITICAL),
    ("critical-priority", {"priority": 2_000_000_000}, DEPLOYMENT, Hold.SYSTEM_CRITICAL),
    ("local-storage", {"local_storage": True}, DEPLOYMENT, Hold.LOCAL_STORAGE),
    ("pvc", {"pvc": True}, DEPLOYMENT, Hold.PVC),
]


@pytest.mark.parametrize(("over", "kind", "hold"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_each_reason_a_pod_is_never_evicted(over: dict[str, Any], kind: WorkloadType | None,
                                             hold: Hold | None) -> None:
    assert eviction_hold(replace(POD, **over), kind, DefaultEvictor()) is hold


def test_every_reason_has_a_case() -> None:
    assert {c[3] for c in CASES} - {None} == set(Hold)


@pytest.mark.parametrize(("flags", "over", "kind"), [
    ({"evict_daemon_set_pods": True}, {}, WorkloadType.DAEMON_SET),
    ({"evict_system_critical_pods": True}, {"priority_class_name": "system-node-critical"},
     DEPLOYMENT),
    ({"evict_local_storage_pods": True}, {"local_storage": True}, DEPLOYMENT),
    ({"ignore_pvc_pods": False}, {"pvc": True}, DEPLOYMENT),
], ids=["daemonset", "system-critical", "local-storage", "pvc"])
def test_the_evictor_flags_allow_what_they_name(flags: dict[str, Any], over: dict[str, Any],
                                                kind: WorkloadType) -> None:
    assert eviction_hold(replace(POD, **over), kind, replace(DefaultEvictor(), **flags)) is None


def test_the_install_namespace_is_protected_wherever_compactor_is_installed() -> None:
    """Installed in ``ops``: its Pods are held like kube-system's, and compactor-system is a
    namespace like any other."""
    protected = names.protected_namespaces("ops")
    assert protected == {"kube-system", "ops"}
    assert eviction_hold(replace(POD, namespace="ops"), DEPLOYMENT, DefaultEvictor(),
                         protected) is Hold.PROTECTED_NAMESPACE
    assert eviction_hold(replace(POD, namespace="compactor-system"), DEPLOYMENT,
                         DefaultEvictor(), protected) is None
    assert untouched("ops", False, None, protected) is Hold.PROTECTED_NAMESPACE
    assert untouched("kube-system", False, None, protected) is Hold.PROTECTED_NAMESPACE
