"""An Event this controller recorded on a Node, as a pass reads it back. Pure.

What the controller has told about a node is kept in the cluster, not in memory: a pass reads
its own Node Events (labelled ``app.kubernetes.io/managed-by=compactor``) to know what it said
last, so that a restarted controller says nothing twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from controller.snapshot.fields import meta, section

# Events about cluster-scoped objects (nodes, cluster policies) live in this namespace, where
# `kubectl describe node` looks for them.
CLUSTER_EVENTS_NAMESPACE: Final = "default"


@dataclass(frozen=True, slots=True)
class NodeEvent:
    name: str
    node: str
    node_uid: str
    reason: str
    message: str
    count: int
    first: str  # firstTimestamp, as the API wrote it
    resource_version: str

    @property
    def written(self) -> tuple[int, str]:
        """Sorts Events in the order they were last written: resourceVersions of one
        resource are decimal integers that grow with every write (KEP-5504, as
        ``controller.kubeapi.resource_versions`` compares them)."""
        return len(self.resource_version), self.resource_version


def parse_node_event(obj: Mapping[str, Any]) -> NodeEvent | None:
    """The record of an Event about a Node; None for an Event about anything else."""
    involved = section(obj, "involvedObject")
    if involved.get("kind") != "Node":
        return None
    m = meta(obj)
    count = obj.get("count")
    return NodeEvent(
        str(m.get("name") or ""), str(involved.get("name") or ""),
        str(involved.get("uid") or ""), str(obj.get("reason") or ""),
        str(obj.get("message") or ""), count if type(count) is int else 1,
        str(obj.get("firstTimestamp") or ""), str(m.get("resourceVersion") or ""))
