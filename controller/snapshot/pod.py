"""A Pod as the controller reads it, and its parser: identity, metadata, requests, constraints,
state. Pure."""

from __future__ import annotations

import datetime
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from compaction import names, quantity
from controller.snapshot.constraints import UNCONSTRAINED, Constraints, parse_constraints
from controller.snapshot.fields import controller_of, meta, parse_time, section, str_map


@dataclass(frozen=True, slots=True)
class PodInfo:
    """A Pod as the controller reads it: identity, metadata, scheduling constraints, state."""

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
    constraints: Constraints = UNCONSTRAINED
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
        constraints=_constraints(spec),
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


_CONSTRAINT_FIELDS = ("nodeSelector", "affinity", "tolerations", "topologySpreadConstraints")


def _constraints(spec: Mapping[str, Any]) -> Constraints:
    if not any(spec.get(k) for k in _CONSTRAINT_FIELDS):
        return UNCONSTRAINED  # most Pods: one shared record
    return _shared_constraints(orjson.dumps([spec.get(k) for k in _CONSTRAINT_FIELDS],
                                          option=orjson.OPT_SORT_KEYS))


@functools.lru_cache(maxsize=4096)
def _shared_constraints(fields: bytes) -> Constraints:
    """One record per distinct set of constraints: a workload's Pods (and every Pod with only
    the API server's default tolerations) share it."""
    return parse_constraints(dict(zip(_CONSTRAINT_FIELDS, orjson.loads(fields), strict=True)))
