"""What one pass knows of the cluster, read in full before anything is decided. Pure.

The reader (``controller.read.reader``) fills a ``Snapshot`` from the API server and the watch
caches; ``controller.plan.decide`` decides from it alone. Objects arrive here as the API's dicts and
leave as frozen records holding only what the decisions read, so no decision pokes into a
dict and a watch cache of them stays small.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from compaction.limit_range import LimitRange
from controller.snapshot.event import NodeEvent
from controller.snapshot.node import NodeInfo
from controller.snapshot.owned import OwnedInfo
from controller.snapshot.owner import OwnerInfo
from controller.snapshot.pdb import PdbInfo
from controller.snapshot.pod import PodInfo
from controller.snapshot.policies import EvaluationInfo, PolicyInfo, StaticPolicyInfo
from controller.snapshot.workload import WorkloadInfo


@dataclass(frozen=True, repr=False)
class Snapshot:
    policies: tuple[PolicyInfo, ...] = ()  # cluster and namespaced
    static_policies: tuple[StaticPolicyInfo, ...] = ()
    limit_ranges: Mapping[str, tuple[LimitRange, ...]] = field(default_factory=dict)  # by ns
    evaluation: EvaluationInfo | None = None  # None: no PolicyEvaluation in the cluster
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    nodes: tuple[NodeInfo, ...] = ()
    pdbs: tuple[PdbInfo, ...] = ()
    workloads: tuple[WorkloadInfo, ...] = ()
    owners: tuple[OwnerInfo, ...] = ()  # ReplicaSets and Jobs
    pods: tuple[PodInfo, ...] = ()
    own: tuple[OwnedInfo, ...] = ()
    node_events: tuple[NodeEvent, ...] = ()  # what the controller has told on Nodes
    cluster_version: str = ""

    def __repr__(self) -> str:
        """Counts, not records: a large cluster's would take seconds to format, and asyncio
        formats a finished task's result when ``asyncio.run`` puts its SIGINT handler back."""
        counted = ", ".join(f"{f.name}={len(getattr(self, f.name))}"
                            for f in dataclasses.fields(self)
                            if f.name not in ("evaluation", "cluster_version"))
        return (f"Snapshot({counted}, evaluation={self.evaluation is not None}, "
                f"cluster_version={self.cluster_version!r})")
