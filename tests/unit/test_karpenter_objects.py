"""What the local cluster hands Karpenter's kwok provider: an instance type whose allocatable,
after the provider's kubelet reserve, is the scenario's node shape, and a NodePool of that
type alone with the consolidation asked for."""

from __future__ import annotations

from localcluster.cluster.control_plane import NodeShape
from localcluster.cluster.karpenter import (
    Consolidation,
    instance_type_name,
    instance_types,
    node_pool,
)

SHAPE = NodeShape(cpu="4", memory="16Gi", pods="110")


def test_the_instance_type_is_the_shape_plus_the_providers_reserve() -> None:
    (it,) = instance_types(SHAPE)
    assert it["name"] == instance_type_name(SHAPE) == "shape-4000m-16384mi"
    # kwok's provider reserves 100m and 10Mi (KubeReserved): allocatable is 4 CPU, 16 GiB.
    assert it["resources"] == {"cpu": "4100m", "memory": "16394Mi", "pods": "110"}
    assert [o["Available"] for o in it["offerings"]] == [True]


def test_the_node_pool_asks_for_that_type_alone_and_the_consolidation_given() -> None:
    pool = node_pool("default", SHAPE, Consolidation("WhenEmpty", "5s"))
    spec = pool["spec"]
    assert spec["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5s",
                                  "budgets": [{"nodes": "100%"}]}
    (req,) = spec["template"]["spec"]["requirements"]
    assert req == {"key": "node.kubernetes.io/instance-type", "operator": "In",
                   "values": ["shape-4000m-16384mi"]}
    assert spec["template"]["spec"]["nodeClassRef"]["kind"] == "KWOKNodeClass"
    # Off by default: the scenario is provisioned before anything may be removed.
    assert Consolidation().render()["consolidateAfter"] == "Never"
