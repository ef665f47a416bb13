"""What one pass knows of the cluster, read in full before anything is decided. Pure.

The reader (``controller.read.reader``) fills a ``Snapshot`` from the API server and the watch
caches; ``controller.plan.decide`` decides from it alone. Objects arrive here as the API's dicts and
leave as frozen records holding only what the decisions read, so no decision pokes into a
dict and a watch cache of them stays small.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from compaction import kinds, names, quantity
from compaction.evaluation import Evaluation, parse_evaluation
from compaction.limit_range import LimitRange
from compaction.policy import Policy, policy_id
from compaction.problem import InvalidPolicy, Problem
from compaction.selector import LabelSelector, parse_selector
from compaction.static_policy import StaticPolicy, parse_static_policy
from compaction.validation import parse_policy
from controller.snapshot.constraints import UNCONSTRAINED, Placement, Taint, parse_placement
from controller.snapshot.fields import controller_of, meta, parse_time, revision, section, str_map
from controller.snapshot.workload import WorkloadObject

OwnerKey = tuple[str, str, str]  # kind, namespace, name


@dataclass(frozen=True, slots=True)
class PodInfo:
    """A Pod as the controller reads it: identity, metadata, placement, state."""

    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    owner: tuple[str, str] | None = None  # controller owner: kind, name
    node_name: str = ""
    scheduler_name: str = "default-scheduler"
    priority: int | None = None
    priority_class_name: str = ""
    phase: str = ""
    ready: bool = False
    deleting: bool = False
    created: datetime.datetime | None = None
    local_storage: bool = False  # an emptyDir or hostPath volume
    pvc: bool = False
    requests: Mapping[str, int] = field(default_factory=dict)  # milli-units, as scheduled
    placement: Placement = UNCONSTRAINED
    # A container the kubelet cannot start, as it says: "<reason>: <message>" (e.g.
    # ImagePullBackOff); empty for nearly every Pod, which costs them one shared reference.
    waiting: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    @property
    def daemon(self) -> bool:
        return self.owner is not None and self.owner[0] == "DaemonSet"

    @property
    def mirror(self) -> bool:
        return names.MIRROR_ANNOTATION in self.annotations

    @property
    def unbound(self) -> bool:
        """Waiting for a scheduler to bind it: no node yet, not deleting, not finished."""
        return not self.node_name and not self.deleting and self.phase in ("", "Pending")

    @property
    def occupies(self) -> bool:
        """Bound and not finished: it holds its requests on its node."""
        return bool(self.node_name) and self.phase not in ("Succeeded", "Failed")


def _container_requests(container: Any) -> dict[str, int]:
    """A container's requests; a resource with a limit and no request requests its limit
    (the API server's defaulting)."""
    if not isinstance(container, Mapping):
        return {}
    resources = section(container, "resources")
    return {**quantity.to_milli(section(resources, "limits")),
            **quantity.to_milli(section(resources, "requests"))}


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """What the scheduler reserves for a Pod: the larger of its containers (with sidecars)
    and any init container (with the sidecars started before it), plus the overhead."""
    sidecars: dict[str, int] = {}
    inits: list[dict[str, int]] = []
    for init in spec.get("initContainers") or []:
        own = _container_requests(init)
        if isinstance(init, Mapping) and init.get("restartPolicy") == "Always":
            sidecars = quantity.add(sidecars, own)
        else:
            inits.append(quantity.add(sidecars, own))
    running = quantity.add(sidecars, *(_container_requests(c)
                                       for c in spec.get("containers") or []))
    return quantity.add(quantity.most([running, *inits]),
                        quantity.to_milli(section(spec, "overhead")))


def parse_pod(obj: Mapping[str, Any]) -> PodInfo:
    m, spec, status = meta(obj), section(obj, "spec"), section(obj, "status")
    volumes = [v for v in spec.get("volumes") or [] if isinstance(v, Mapping)]
    priority = spec.get("priority")
    phase = str(status.get("phase") or "")
    return PodInfo(
        namespace=str(m.get("namespace") or ""), name=str(m.get("name") or ""),
        uid=str(m.get("uid") or ""),
        labels=str_map(m.get("labels")), annotations=str_map(m.get("annotations")),
        owner=controller_of(m),
        node_name=str(spec.get("nodeName") or ""),
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool)
        else None,
        priority_class_name=str(spec.get("priorityClassName") or ""),
        phase=phase,
        ready=phase == "Running" and any(
            isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []),
        deleting=bool(m.get("deletionTimestamp")),
        created=parse_time(m.get("creationTimestamp")),
        local_storage=any("emptyDir" in v or "hostPath" in v for v in volumes),
        pvc=any("persistentVolumeClaim" in v for v in volumes),
        requests=pod_requests(spec),
        placement=_placement(spec),
        waiting=waiting_reason(status),
    )


# Waiting reasons of a container on its way to start, not stuck.
_STARTING = frozenset({"ContainerCreating", "PodInitializing"})


def waiting_reason(status: Mapping[str, Any]) -> str:
    """The first container (init containers first) the kubelet holds back, with its reason
    and message, so that whoever reads the Pod's record can name why it does not run."""
    for s in [*(status.get("initContainerStatuses") or []),
              *(status.get("containerStatuses") or [])]:
        waiting = section(section(s, "state"), "waiting") if isinstance(s, Mapping) else {}
        reason = str(waiting.get("reason") or "")
        if reason and reason not in _STARTING:
            message = str(waiting.get("message") or "")
            return (f"{reason}: {message}" if message else reason)[:500]
    return ""


_PLACEMENT_FIELDS = ("nodeSelector", "affinity", "tolerations", "topologySpreadConstraints")


def _placement(spec: Mapping[str, Any]) -> Placement:
    if not any(spec.get(k) for k in _PLACEMENT_FIELDS):
        return UNCONSTRAINED  # most Pods: one shared record
    return _shared_placement(orjson.dumps([spec.get(k) for k in _PLACEMENT_FIELDS],
                                          option=orjson.OPT_SORT_KEYS))


@functools.lru_cache(maxsize=4096)
def _shared_placement(fields: bytes) -> Placement:
    """One record per distinct set of constraints: a workload's Pods (and every Pod with only
    the API server's default tolerations) share it."""
    return parse_placement(dict(zip(_PLACEMENT_FIELDS, orjson.loads(fields), strict=True)))


@dataclass(frozen=True, slots=True)
class OwnerInfo:
    """An intermediate owner (ReplicaSet, Job): only a step of a Pod's owner chain."""

    kind: str
    namespace: str
    name: str
    controller: tuple[str, str] | None
    annotations: Mapping[str, str]
    # A Job's creation and end: its Complete condition, or its Failed condition's
    # "<reason>: <message>" (what a descheduler run that failed reports).
    created: datetime.datetime | None = None
    complete: bool = False
    failure: str = ""

    @property
    def key(self) -> OwnerKey:
        return self.kind, self.namespace, self.name


def owner_parser(kind: str) -> Callable[[Mapping[str, Any]], OwnerInfo]:
    def parse(obj: Mapping[str, Any]) -> OwnerInfo:
        m = meta(obj)
        info = OwnerInfo(kind, str(m.get("namespace") or ""), str(m.get("name") or ""),
                         controller_of(m), str_map(m.get("annotations")))
        if kind != "Job":
            return info
        ended = {str(c.get("type")): c for c in section(obj, "status").get("conditions") or []
                 if isinstance(c, Mapping) and c.get("status") == "True"}
        failed = ended.get("Failed")
        failure = "" if failed is None else ": ".join(
            str(failed[k]) for k in ("reason", "message") if failed.get(k)) or "Failed"
        return dataclasses.replace(info, created=parse_time(m.get("creationTimestamp")),
                                   complete="Complete" in ended, failure=failure[:500])
    return parse


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    allocatable: Mapping[str, int] = field(default_factory=dict)  # milli-units
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    resource_version: str = ""
    uid: str = ""


def parse_node(obj: Mapping[str, Any]) -> NodeInfo:
    m, spec, status = meta(obj), section(obj, "spec"), section(obj, "status")
    taints = tuple(Taint(str(t.get("key") or ""), str(t.get("value") or ""),
                         str(t.get("effect") or ""), str(t.get("timeAdded") or ""))
                   for t in spec.get("taints") or [] if isinstance(t, Mapping))
    return NodeInfo(
        str(m.get("name") or ""), str_map(m.get("labels")),
        quantity.to_milli(section(status, "allocatable")), taints,
        bool(spec.get("unschedulable")),
        any(isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []),
        str(m.get("resourceVersion") or ""), str(m.get("uid") or ""))


@dataclass(frozen=True)
class PdbInfo:
    """A PodDisruptionBudget as the planner reads it: whom it covers, what it allows now."""

    namespace: str
    name: str
    selector: LabelSelector | None  # policy/v1: none selects no Pod, an empty one every Pod
    disruptions_allowed: int

    def covers(self, pod: PodInfo) -> bool:
        return (self.selector is not None and pod.namespace == self.namespace
                and self.selector.matches(pod.labels))


def parse_pdb(obj: Mapping[str, Any]) -> PdbInfo:
    m = meta(obj)
    raw = section(obj, "spec").get("selector")
    problems: list[Problem] = []
    selector = parse_selector(raw, "", problems, allow_wildcards=True) if raw is not None \
        else None
    return PdbInfo(str(m.get("namespace") or ""), str(m.get("name") or ""),
                   None if problems else selector,
                   int(section(obj, "status").get("disruptionsAllowed") or 0))


@dataclass(frozen=True)
class PolicyObject:
    """A policy as stored (kind, namespace, name, generation, the status it shows) and as
    parsed."""

    name: str
    generation: int
    status: Mapping[str, Any]
    policy: Policy | None  # None when it is invalid
    problems: tuple[Problem, ...] = ()
    uid: str = ""
    namespace: str = ""  # a CompactionPolicy's; empty for a ClusterCompactionPolicy
    spec: Mapping[str, Any] = field(default_factory=dict)  # as stored
    # While it is invalid: the last spec it was valid with (kept in its status), parsed.
    last_valid: Policy | None = None

    @property
    def acting(self) -> Policy | None:
        """The policy a pass acts on: its spec, or while that is invalid the last valid one
        (a bad edit must not act like a deletion)."""
        return self.policy or self.last_valid

    @property
    def last_valid_generation(self) -> int:
        value = self.status.get(LAST_VALID_GENERATION)
        return value if isinstance(value, int) else 0

    @property
    def kind(self) -> str:
        return names.NAMESPACED_POLICY_KIND if self.namespace else names.POLICY_KIND

    @property
    def id(self) -> str:
        return policy_id(self.namespace, self.name)

    @property
    def key(self) -> str:
        return Policy(self.name, self.namespace).key

    @property
    def status_path(self) -> str:
        return kinds.kind(self.kind).path(self.namespace or None, self.name, "status")


# Where a policy's status keeps the last spec it was valid with, and that spec's generation.
LAST_VALID_SPEC = "lastValidSpec"
LAST_VALID_GENERATION = "lastValidGeneration"


def parse_policy_object(obj: Mapping[str, Any]) -> PolicyObject:
    m, status = meta(obj), section(obj, "status")
    name, generation = str(m.get("name", "")), int(m.get("generation") or 0)
    uid = str(m.get("uid") or "")
    namespace = str(m.get("namespace") or "") if obj.get("kind") == \
        names.NAMESPACED_POLICY_KIND else ""
    spec = section(obj, "spec")
    try:
        return PolicyObject(name, generation, status, parse_policy(obj), uid=uid,
                            namespace=namespace, spec=spec)
    except InvalidPolicy as e:
        kept = section(status, LAST_VALID_SPEC)
        last_valid = None
        if kept:
            try:
                last_valid = parse_policy({**obj, "spec": kept})
            except InvalidPolicy:
                pass  # written by a release that accepted more: nothing to fall back on
        return PolicyObject(name, generation, status, None, tuple(e.problems), uid,
                            namespace, spec, last_valid)


@dataclass(frozen=True)
class StaticPolicyObject:
    """A resource policy as stored and as parsed."""

    kind: str
    namespace: str
    name: str
    generation: int
    status: Mapping[str, Any]
    policy: StaticPolicy | None  # None when it is invalid
    problems: tuple[Problem, ...] = ()

    @property
    def key(self) -> str:
        return StaticPolicy(self.name, self.namespace).key

    @property
    def status_path(self) -> str:
        return kinds.kind(self.kind).path(self.namespace or None, self.name, "status")


def parse_static_policy_object(obj: Mapping[str, Any]) -> StaticPolicyObject:
    m = meta(obj)
    kind = str(obj.get("kind") or names.CLUSTER_STATIC_POLICY_KIND)
    namespace = str(m.get("namespace") or "") if kind == names.STATIC_POLICY_KIND else ""
    name, generation = str(m.get("name", "")), int(m.get("generation") or 0)
    try:
        return StaticPolicyObject(kind, namespace, name, generation, section(obj, "status"),
                                  parse_static_policy(obj))
    except InvalidPolicy as e:
        return StaticPolicyObject(kind, namespace, name, generation, section(obj, "status"),
                                  None, tuple(e.problems))


@dataclass(frozen=True)
class EvaluationObject:
    """The ``PolicyEvaluation`` singleton as stored and as parsed."""

    evaluation: Evaluation
    problems: tuple[Problem, ...]
    status: Mapping[str, Any]
    uid: str = ""


def parse_evaluation_object(obj: Mapping[str, Any]) -> EvaluationObject:
    evaluation, problems = parse_evaluation(obj)
    return EvaluationObject(evaluation, tuple(problems), section(obj, "status"),
                            str(meta(obj).get("uid") or ""))


@dataclass(frozen=True)
class OwnObject:
    """An object the controller created in its namespace, as the API server holds it now."""

    kind: str
    name: str
    labels: Mapping[str, str]
    revision: str  # controller.snapshot.fields.revision: changes when its desired state changes
    available_replicas: int = 0
    created: datetime.datetime | None = None
    # A Deployment's ``Available`` condition: its status, and since when it has held it.
    available: bool | None = None
    available_changed: datetime.datetime | None = None

    @property
    def policy(self) -> str | None:
        return self.labels.get("compactor.dev/policy")


def parse_own(kind: str, obj: Mapping[str, Any]) -> OwnObject:
    m, status = meta(obj), section(obj, "status")
    condition = next((c for c in status.get("conditions") or []
                      if isinstance(c, Mapping) and c.get("type") == "Available"), None)
    return OwnObject(kind, str(m.get("name") or ""), str_map(m.get("labels")),
                     revision(kind, obj), int(status.get("availableReplicas") or 0),
                     parse_time(m.get("creationTimestamp")),
                     None if condition is None else condition.get("status") == "True",
                     None if condition is None else parse_time(
                         condition.get("lastTransitionTime")))


@dataclass(frozen=True, repr=False)
class Snapshot:
    policies: tuple[PolicyObject, ...] = ()  # cluster and namespaced
    static_policies: tuple[StaticPolicyObject, ...] = ()
    limit_ranges: Mapping[str, tuple[LimitRange, ...]] = field(default_factory=dict)  # by ns
    evaluation: EvaluationObject | None = None  # None: no PolicyEvaluation in the cluster
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    nodes: tuple[NodeInfo, ...] = ()
    pdbs: tuple[PdbInfo, ...] = ()
    workloads: tuple[WorkloadObject, ...] = ()
    owners: tuple[OwnerInfo, ...] = ()  # ReplicaSets and Jobs
    pods: tuple[PodInfo, ...] = ()
    own: tuple[OwnObject, ...] = ()
    cluster_version: str = ""

    def __repr__(self) -> str:
        """Counts, not records: a large cluster's would take seconds to format, and asyncio
        formats a finished task's result when ``asyncio.run`` puts its SIGINT handler back."""
        counted = ", ".join(f"{f.name}={len(getattr(self, f.name))}"
                            for f in dataclasses.fields(self)
                            if f.name not in ("evaluation", "cluster_version"))
        return (f"Snapshot({counted}, evaluation={self.evaluation is not None}, "
                f"cluster_version={self.cluster_version!r})")
