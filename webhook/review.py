"""The AdmissionReview wire format (admission.k8s.io/v1) and the slice of a Pod we read."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, NotRequired, TypedDict

import orjson

from compaction import names
from webhook.errors import MalformedReview, UnpatchableObject

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
_EMPTY: Mapping[str, str] = MappingProxyType({})


class GroupVersionKind(TypedDict):
    group: str
    version: str
    kind: str


class AdmissionRequest(TypedDict):
    uid: str
    kind: GroupVersionKind
    operation: Operation
    namespace: NotRequired[str]
    name: NotRequired[str]
    subResource: NotRequired[str]
    dryRun: NotRequired[bool]
    object: NotRequired[dict[str, Any]]


# The records below are NamedTuples, not frozen dataclasses: every admission builds them, and
# a frozen dataclass's __init__ costs twice as much (one object.__setattr__ per field).


class OwnerRef(NamedTuple):
    api_version: str
    kind: str
    name: str
    uid: str


class ContainerView(NamedTuple):
    """A container's resources as the Pod arrives (LimitRanger's defaults already in)."""

    name: str
    requests: Mapping[str, str] = _EMPTY
    limits: Mapping[str, str] = _EMPTY
    # Whether each map exists: adding a key to a missing map must create the map.
    has_resources: bool = False
    has_requests: bool = False
    has_limits: bool = False


class PodView(NamedTuple):
    namespace: str
    name: str
    labels: Mapping[str, str] = _EMPTY
    annotations: Mapping[str, str] = _EMPTY
    scheduler_name: str | None = None
    controller: OwnerRef | None = None
    # Whether the maps exist at all: adding a key to a missing map must create the map.
    has_labels: bool = False
    has_annotations: bool = False
    priority: Any = None  # spec.priority, resolved from priorityClassName before webhooks run
    spec_containers: Any = None  # spec.containers as the request has it

    @property
    def is_mirror(self) -> bool:
        return names.MIRROR_ANNOTATION in self.annotations

    def containers(self) -> tuple[ContainerView, ...] | None:
        """spec.containers in order (init containers are never resized); None when the list
        is not one a patch could address. Read on demand: only a Pod whose workload has a
        resource plan needs it."""
        return container_views(self.spec_containers)


def parse_review(body: bytes) -> AdmissionRequest:
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise MalformedReview(f"body is not JSON: {e}") from e
    if not isinstance(review, dict):
        raise MalformedReview("body is not a JSON object")
    if review.get("apiVersion") != "admission.k8s.io/v1" or review.get("kind") != "AdmissionReview":
        raise MalformedReview("expected apiVersion admission.k8s.io/v1, kind AdmissionReview")
    request = review.get("request")
    if not isinstance(request, dict):
        raise MalformedReview("AdmissionReview has no request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise MalformedReview("request.uid is missing")
    if not isinstance(request.get("kind"), dict) or not isinstance(request.get("operation"), str):
        raise MalformedReview("request.kind and request.operation are required")
    return request  # type: ignore[return-value]


def is_pod_create(request: AdmissionRequest) -> bool:
    kind = request["kind"]
    return (request["operation"] == "CREATE" and kind.get("group") == ""
            and kind.get("kind") == "Pod" and not request.get("subResource"))


def controller_ref(refs: Any) -> OwnerRef | None:
    """The ownerReference with ``controller: true``, if any."""
    if not isinstance(refs, list):
        return None
    for ref in refs:
        if isinstance(ref, dict) and ref.get("controller") is True:
            try:
                return OwnerRef(str(ref["apiVersion"]), str(ref["kind"]), str(ref["name"]),
                                str(ref["uid"]))
            except KeyError:
                return None
    return None


def _str_map(raw: Any) -> dict[str, str]:
    """The string-valued entries (a non-string value is one a patch of ours replaces)."""
    if not isinstance(raw, dict):
        return {}
    return {str(k): v for k, v in raw.items() if isinstance(v, str)}


def _map_or_absent(meta: dict[str, Any], key: str) -> bool:
    """Whether ``meta[key]`` is a map; raises when it is something a patch must not clobber."""
    value = meta.get(key)
    if value is not None and not isinstance(value, dict):
        raise UnpatchableObject(f"metadata.{key} is a {type(value).__name__}, not a map")
    return isinstance(value, dict)


def _quantities(raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict):
        return {}
    return {str(k): str(v) for k, v in raw.items() if isinstance(v, str | int | float)}


def container_views(raw: Any) -> tuple[ContainerView, ...] | None:
    """The containers a resource patch may address by index; None when any of them is not
    a map with a name and map-or-absent resources (a patch could then not apply)."""
    if not isinstance(raw, list):
        return None
    out = []
    for c in raw:
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            return None
        res = c.get("resources")
        if res is not None and not isinstance(res, dict):
            return None
        res = res or {}
        req, lim = res.get("requests"), res.get("limits")
        if (req is not None and not isinstance(req, dict)) or (
                lim is not None and not isinstance(lim, dict)):
            return None
        out.append(ContainerView(c["name"], _quantities(req), _quantities(lim),
                                 "resources" in c and c["resources"] is not None,
                                 isinstance(req, dict), isinstance(lim, dict)))
    return tuple(out)


def pod_view(request: AdmissionRequest) -> PodView:
    """The Pod as far as admission reads it; UnpatchableObject when no patch could apply to it
    (no metadata or spec map to write into)."""
    pod = request.get("object")
    if not isinstance(pod, dict):
        raise UnpatchableObject("a Pod CREATE request carries no object")
    meta, spec = pod.get("metadata"), pod.get("spec")
    if not isinstance(meta, dict):
        raise UnpatchableObject("Pod metadata is not a map")
    if not isinstance(spec, dict):
        raise UnpatchableObject("Pod spec is not a map")
    has_labels = _map_or_absent(meta, "labels")
    has_annotations = _map_or_absent(meta, "annotations")
    sched = spec.get("schedulerName")
    return PodView(
        # The namespace is on the request; metadata may omit it for generated names.
        namespace=str(request.get("namespace") or meta.get("namespace") or ""),
        name=str(meta.get("name") or meta.get("generateName") or ""),
        labels=_str_map(meta.get("labels")),
        annotations=_str_map(meta.get("annotations")),
        scheduler_name=sched if isinstance(sched, str) and sched else None,
        controller=controller_ref(meta.get("ownerReferences")),
        has_labels=has_labels,
        has_annotations=has_annotations,
        priority=spec.get("priority"),
        spec_containers=spec.get("containers"),
    )


def response(uid: str, patch: list[dict[str, Any]] | None = None,
             warnings: list[str] | None = None) -> bytes:
    """An ``allowed: true`` AdmissionReview answer, with a JSONPatch when there is one."""
    resp: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        resp["patchType"] = "JSONPatch"
        resp["patch"] = base64.b64encode(orjson.dumps(patch)).decode()
    if warnings:
        resp["warnings"] = warnings
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                         "response": resp})
