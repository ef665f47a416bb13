"""One level-triggered pass: read the cluster, compute what should be, write the difference.

Every pass starts from what the API server holds, so a restart, a lost watch (410) or a
conflicting writer (409) costs at most one more pass and never loses or duplicates work.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from compaction import kinds, names
from compaction.intent import Intent
from compaction.policy import Policy, SchedulerMode, parse_policy
from compaction.problem import InvalidPolicy, Problem
from compaction.workload import WorkloadType
from controller import descheduler, scheduler
from controller.api import Api, ApiError, Obj
from controller.informer import Lister
from controller.metrics import ControllerMetrics
from controller.pods import OwnerIndex, pod_patch, stale_copies
from controller.runtime import RuntimeSettings, scheduler_image
from controller.runtime_hook import RuntimeHook
from controller.status import (
    invalid_conditions,
    policy_conditions,
    render_conditions,
    status_body,
)
from controller.workloads import (
    WorkloadObject,
    desired_policy,
    intent_of,
    list_path,
    workload_object,
    workload_patch,
)

log = logging.getLogger("compactor.controller")
POLICIES = kinds.kind(names.POLICY_KIND).path()
PODS, REPLICA_SETS, JOBS = (kinds.kind(k).path() for k in ("Pod", "ReplicaSet", "Job"))
INFORMED = (PODS, REPLICA_SETS, JOBS)
VERSION_TTL_SECONDS = 600.0


@dataclass
class Summary:
    workloads_patched: int = 0
    pods_patched: int = 0
    managed: dict[str, int] = field(default_factory=dict)
    invalid: dict[str, list[Problem]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


class Reconciler:
    def __init__(self, api: Api, runtime: RuntimeSettings,
                 namespace: str = names.INSTALL_NAMESPACE,
                 metrics: ControllerMetrics | None = None,
                 hook: RuntimeHook | None = None, reads: Lister | None = None) -> None:
        self.api = api
        # Pods and their intermediate owners, the bulk of every pass, come from informers when
        # synced. What the controller writes (workloads, policies) is always read fresh: a
        # stale read there could bring back state it has just replaced.
        self.reads: Lister = reads or api
        self.runtime = runtime
        self.namespace = namespace
        self.metrics = metrics or ControllerMetrics()
        self.hook = hook or RuntimeHook(api, self.metrics)
        self._missing_kinds: set[WorkloadType] = set()
        # Our own objects deleted by us: no DELETE every pass while nothing needs them.
        self._absent: set[str] = set()
        self._version: tuple[str, float] = ("", 0.0)

    async def reconcile(self) -> Summary:
        summary = Summary()
        raw_policies, _ = await self.api.list(POLICIES)
        policies: list[Policy] = []
        for obj in raw_policies:
            try:
                policies.append(parse_policy(obj))
            except InvalidPolicy as e:
                summary.invalid[e.name] = e.problems
        active = [p for p in policies if p.enabled]
        namespaces = {str(n["metadata"]["name"]): n["metadata"].get("labels") or {}
                      for n in (await self.api.list(kinds.kind("Namespace").path()))[0]}
        workloads = await self._workloads(namespaces)
        by_key: dict[tuple[str, str, str], tuple[WorkloadObject, Policy | None]] = {}
        for w in workloads:
            policy = desired_policy(active, w)
            by_key[w.key] = (w, policy)
            if policy is not None:
                summary.managed[policy.name] = summary.managed.get(policy.name, 0) + 1
            await self._converge_workload(w, policy, summary)
        nodes, _ = await self.api.list(kinds.kind("Node").path())
        await self._converge_pods(by_key, nodes, summary)
        scheduler_available = await self._converge_scheduler(active)
        pools = await self._converge_deschedulers(active, summary.managed, nodes)
        await self._write_status(raw_policies, policies, summary, scheduler_available, pools)
        return summary

    # --- workloads -------------------------------------------------------------------

    async def _workloads(self, namespaces: Mapping[str, Mapping[str, str]]
                         ) -> list[WorkloadObject]:
        out: list[WorkloadObject] = []
        for kind in WorkloadType:
            try:
                items, _ = await self.api.list(list_path(kind))
            except ApiError as e:
                if e.status == 404:  # that API (e.g. Argo Rollouts) is not installed
                    if kind not in self._missing_kinds:
                        log.info("%s API not served; skipping that kind", kind.value)
                        self._missing_kinds.add(kind)
                    continue
                raise
            self._missing_kinds.discard(kind)
            for obj in items:
                ns = str(obj["metadata"].get("namespace", ""))
                if ns in names.PROTECTED_NAMESPACES:
                    continue
                workload = workload_object(kind, obj, namespaces.get(ns, {}))
                if workload is not None:
                    out.append(workload)
        return out

    async def _converge_workload(self, w: WorkloadObject, policy: Policy | None,
                                 summary: Summary) -> None:
        patch = workload_patch(w, intent_of(policy, w.view.kind))
        if patch is None:
            return
        before = w.labels.get(names.POLICY_LABEL)
        try:
            await self.api.patch(w.path, patch)
        except ApiError as e:
            if e.status == 404:
                return  # deleted since we listed it
            summary.errors.append(f"patch {w.path}: {e}")
            return
        summary.workloads_patched += 1
        after = policy.name if policy else None
        if before != after:
            await self._event(w, before, after)

    async def _event(self, w: WorkloadObject, before: str | None, after: str | None) -> None:
        message = (f"compaction policy {after!r} applies" if before is None else
                   f"no compaction policy applies any more (was {before!r})" if after is None
                   else f"compaction policy changed from {before!r} to {after!r}")
        gv = kinds.kind(w.view.kind.value).api_version
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{w.view.name}.", "namespace": w.view.namespace},
            "involvedObject": {"kind": w.view.kind.value, "namespace": w.view.namespace,
                               "name": w.view.name, "uid": w.uid, "apiVersion": gv},
            "reason": "CompactionPolicyChanged", "message": message, "type": "Normal",
            "source": {"component": "compactor-controller"},
            "reportingComponent": "compactor-controller",
        }
        try:
            await self.api.create(kinds.kind("Event").path(w.view.namespace), event)
        except ApiError as e:
            log.warning("could not record event on %s: %s", w.path, e)

    # --- pods ------------------------------------------------------------------------

    async def _converge_pods(self, by_key: Mapping[tuple[str, str, str],
                                                   tuple[WorkloadObject, Policy | None]],
                             nodes: list[Obj], summary: Summary) -> None:
        intermediates: list[tuple[str, Obj]] = []
        for kind, path in (("ReplicaSet", REPLICA_SETS), ("Job", JOBS)):
            intermediates += [(kind, o) for o in (await self.reads.list(path))[0]]
        index = OwnerIndex.build(intermediates)
        await self._strip_stale_copies(index, by_key, summary)
        pods, _ = await self.reads.list(PODS)
        intents: dict[tuple[str, WorkloadType], Intent | None] = {}
        members: dict[tuple[str, str, str], list[Obj]] = {}
        for pod in pods:
            meta = pod.get("metadata") or {}
            if meta.get("namespace") in names.PROTECTED_NAMESPACES or meta.get("deletionTimestamp"):
                continue
            found = index.workload(pod)
            if found is None or found[0] not in by_key:
                continue
            workload, policy = by_key[found[0]]
            members.setdefault(workload.key, []).append(pod)
            which = (policy.name if policy else "", workload.view.kind)
            if which not in intents:
                intents[which] = intent_of(policy, workload.view.kind)
            patch = pod_patch(pod, intents[which], workload.suppressed)
            if patch is None:
                continue
            path = kinds.kind("Pod").path(meta["namespace"], meta["name"])
            try:
                await self.api.patch(path, patch)
                summary.pods_patched += 1
            except ApiError as e:
                if e.status != 404:
                    summary.errors.append(f"patch {path}: {e}")
        await self._runtime_hook(by_key, members, nodes, summary)

    async def _strip_stale_copies(self, index: OwnerIndex,
                                  by_key: Mapping[tuple[str, str, str],
                                                  tuple[WorkloadObject, Policy | None]],
                                  summary: Summary) -> None:
        """Remove from ReplicaSets (and a CronJob's Jobs) the copies of our annotations that
        their workload no longer carries, so that ``kubectl`` shows the truth there too."""
        for key, parent in index.intermediates():
            if parent not in by_key:
                continue
            workload, policy = by_key[parent]
            wanted = dict(workload.annotations)
            intent = intent_of(policy, workload.view.kind)
            if intent is None:
                wanted.pop(names.INTENT_ANNOTATION, None)
            else:
                wanted[names.INTENT_ANNOTATION] = intent.render()
            ops = stale_copies(index.annotations.get(key, {}), wanted)
            if not ops:
                continue
            path = kinds.kind(key[0]).path(key[1], key[2])
            try:
                await self.api.patch(path, ops, "json")
            except ApiError as e:
                # 404: gone; 422: its test failed, the copy changed since it was read.
                if e.status not in (404, 422):
                    summary.errors.append(f"patch {path}: {e}")

    async def _runtime_hook(self, by_key: Mapping[tuple[str, str, str],
                                                  tuple[WorkloadObject, Policy | None]],
                            members: Mapping[tuple[str, str, str], list[Obj]],
                            nodes: list[Obj], summary: Summary) -> None:
        node_labels = {str(n["metadata"]["name"]): n["metadata"].get("labels") or {}
                       for n in nodes}
        observed = _label_values(nodes)
        suppressed = 0
        for key, (workload, policy) in by_key.items():
            if policy is None:
                if workload.suppressed or names.CONVERGENCE_ANNOTATION in workload.annotations:
                    await self.hook.forget(workload)
                continue
            pods = members.get(key, [])
            selector = policy.descheduler.node_selector.expand_wildcards(observed)
            try:
                if await self.hook.step(workload, policy, pods, node_labels, selector):
                    suppressed += 1
            except ApiError as e:
                summary.errors.append(f"runtime hook {workload.path}: {e}")
        self.metrics.suppressed.set(suppressed)

    # --- compaction scheduler --------------------------------------------------------

    async def _converge_scheduler(self, active: list[Policy]) -> bool:
        ns = self.namespace
        cm_path = kinds.kind("ConfigMap").path(ns, names.SCHEDULER_CONFIGMAP)
        deploy_path = kinds.kind("Deployment").path(ns, scheduler.DEPLOYMENT)
        if not any(p.scheduler.mode is SchedulerMode.MANAGED for p in active):
            for path in (deploy_path, cm_path):
                if path not in self._absent:
                    await self.api.delete(path)
                    self._absent.add(path)
            return False
        self._absent -= {deploy_path, cm_path}
        cm = scheduler.scheduler_configmap(self.namespace)
        await self.api.apply(cm_path, cm)
        image = scheduler_image(self.runtime.scheduler_image_override, None, None,
                                await self._cluster_version())
        deploy = scheduler.scheduler_deployment(
            self.runtime.scheduler, image, _hash(cm["data"][scheduler.CONFIG_KEY]),
            self.namespace)
        current = await self.api.apply(deploy_path, deploy)
        return int((current.get("status") or {}).get("availableReplicas") or 0) > 0

    async def _cluster_version(self) -> str:
        """The API server's version, asked again every ten minutes (it changes on upgrades)."""
        version, at = self._version
        if not version or time.monotonic() - at > VERSION_TTL_SECONDS:
            self._version = (await self.api.version(), time.monotonic())
        return self._version[0]

    # --- descheduler per policy ------------------------------------------------------

    async def _converge_deschedulers(self, active: list[Policy], managed: Mapping[str, int],
                                     nodes: list[Obj]) -> dict[str, int]:
        """Apply each active descheduler's ConfigMap and CronJob; returns, per policy, how many
        nodes its pool holds. The CronJob is suspended while the policy manages no workload
        or its pool has no node, since a run could do nothing."""
        node_labels = _label_values(nodes)
        labels_of = [n["metadata"].get("labels") or {} for n in nodes]
        wanted = {p.name: p for p in active if p.descheduler.enabled}
        configmaps, cronjobs = kinds.kind("ConfigMap"), kinds.kind("CronJob")
        pools: dict[str, int] = {}
        for policy in wanted.values():
            name = names.descheduler_name(policy.name)
            pool = descheduler.node_pool(policy, node_labels)
            pools[policy.name] = sum(1 for labels in labels_of if pool.matches(labels))
            doc = descheduler.render_descheduler_policy(policy, node_labels)
            await self.api.apply(configmaps.path(self.namespace, name),
                                 descheduler.descheduler_configmap(policy, doc, self.namespace))
            idle = managed.get(policy.name, 0) == 0 or pools[policy.name] == 0
            cron = descheduler.descheduler_cronjob(
                policy, self.runtime.descheduler, suspend=idle, namespace=self.namespace)
            await self.api.apply(cronjobs.path(self.namespace, name), cron)
        # Remove what no active policy wants any more (deleted policies are also
        # garbage-collected through their ownerReferences).
        selector = (f"{names.MANAGED_BY_LABEL}={names.MANAGED_BY_VALUE},"
                    "app.kubernetes.io/component=descheduler")
        for kind in (cronjobs, configmaps):
            for obj in (await self.api.list(kind.path(self.namespace), selector))[0]:
                owner = (obj["metadata"].get("labels") or {}).get(names.POLICY_LABEL)
                if owner not in wanted:
                    await self.api.delete(kind.path(self.namespace, obj["metadata"]["name"]))
        return pools

    # --- status ----------------------------------------------------------------------

    async def _write_status(self, raw: list[Obj], policies: list[Policy], summary: Summary,
                            scheduler_available: bool, pools: Mapping[str, int]) -> None:
        parsed = {p.name: p for p in policies}
        for obj in raw:
            meta = obj["metadata"]
            name, generation = str(meta["name"]), int(meta.get("generation", 0))
            previous = (obj.get("status") or {}).get("conditions") or []
            policy = parsed.get(name)
            if policy is None:
                conditions = invalid_conditions(summary.invalid.get(name, []))
                body = status_body(False, None, None, 0, generation,
                                   render_conditions(conditions, previous, generation))
            else:
                managed = summary.managed.get(name, 0)
                conditions = policy_conditions(policy, scheduler_available,
                                               pools.get(name), managed)
                body = status_body(policy.enabled, policy.scheduler.scheduler_name,
                                   policy.scheduler.mode.value, managed, generation,
                                   render_conditions(conditions, previous, generation))
            if _same_status(obj.get("status") or {}, body):
                continue
            try:
                await self.api.patch(kinds.kind(names.POLICY_KIND).path(name=name,
                                                                        subresource="status"),
                                     {"status": body})
            except ApiError as e:
                if e.status != 404:
                    summary.errors.append(f"status of {name}: {e}")


def _label_values(nodes: list[Obj]) -> dict[str, set[str]]:
    """Every value each node label has somewhere in the cluster (for wildcard expansion)."""
    values: dict[str, set[str]] = defaultdict(set)
    for node in nodes:
        for k, v in (node["metadata"].get("labels") or {}).items():
            values[k].add(v)
    return values


def _same_status(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    return yaml.safe_dump(dict(old), sort_keys=True) == yaml.safe_dump(dict(new), sort_keys=True)
