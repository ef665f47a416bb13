"""Which workload each Pod belongs to as this pass decided it, and the metadata each Pod
should carry. Pure."""

from __future__ import annotations

import functools
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass

from compaction import kinds, names
from compaction.intent import Intent
from compaction.policy import Policy
from compaction.workload import WorkloadType
from controller.drain_planner.drain_plan import Member
from controller.plan.actions import (
    Patch,
    Target,
)
from controller.plan.draft import Draft
from controller.plan.pod_metadata import OwnerIndex, pod_patch
from controller.plan.workload_metadata import intent_of
from controller.snapshot.pod import PodInfo
from controller.snapshot.workload import WorkloadInfo, WorkloadKey


@dataclass(frozen=True)
class Membership:
    """A Pod's workload, as this pass decided it."""

    workload: WorkloadInfo
    policy: Policy | None

    @functools.cached_property
    def member(self) -> Member:
        """The planner's view; one per workload, shared by all its Pods."""
        return Member(self.workload.view.kind, self.policy.id if self.policy else None,
                      self.workload.suppressed)


def memberships(pods: Iterable[PodInfo], index: OwnerIndex,
                decided: Mapping[WorkloadKey, tuple[WorkloadInfo, Policy | None]],
                protected: frozenset[str] = names.PROTECTED_NAMESPACES
                ) -> dict[tuple[str, str], Membership]:
    """Each Pod's workload and effective policy; none for a Pod in a ``protected`` namespace
    (``names.protected_namespaces``) or one that is leaving."""
    out: dict[tuple[str, str], Membership] = {}
    by_owner: dict[tuple[str, tuple[str, str] | None], Membership | None] = {}
    for pod in pods:
        if pod.namespace in protected or pod.deleting:
            continue
        owner = (pod.namespace, pod.owner)  # a workload's Pods share their owner: look up once
        if owner not in by_owner:
            key = index.workload(pod)
            found = decided.get(key) if key is not None else None
            by_owner[owner] = Membership(*found) if found is not None else None
        if (m := by_owner[owner]) is not None:
            out[pod.key] = m
    return out


def by_workload(pods: Iterable[PodInfo], members: Mapping[tuple[str, str], Membership],
                only: Container[WorkloadKey] | None = None) -> dict[WorkloadKey, list[PodInfo]]:
    """The members among ``pods``, grouped by their workload (only those of ``only``)."""
    out: dict[WorkloadKey, list[PodInfo]] = {}
    for pod in pods:
        if (m := members.get(pod.key)) is not None and (only is None or m.workload.key in only):
            out.setdefault(m.workload.key, []).append(pod)
    return out


def label_pods(pods: Iterable[PodInfo], members: Mapping[tuple[str, str], Membership],
               draining: Mapping[tuple[str, str], tuple[str, str]], up: bool, out: Draft
               ) -> None:
    """``draining``: the Pods marked for eviction, with their policy and planned node."""
    intents: dict[tuple[str, WorkloadType], Intent | None] = {}
    pod_kind = kinds.kind("Pod")
    for pod in pods:
        m = members.get(pod.key)
        if m is None:
            continue
        which = (m.policy.id if m.policy else "", m.workload.view.kind)
        if which not in intents:
            intents[which] = intent_of(m.policy, m.workload.view.kind, up)
        policy, planned = draining.get(pod.key, (None, None))
        patch = pod_patch(pod, intents[which], m.workload.suppressed, policy, planned)
        if patch is not None:
            out.actions.append(Patch(pod_kind.path(pod.namespace, pod.name), patch, Target.POD))
