"""The fields of a Pod that ``controller.snapshot.pod.parse_pod`` reads (and that an informer
keys and selects it by), as a schema to decode lists of Pods through.

A Pod as the API server returns it is about 4 KB of JSON, most of it managed fields, volume
mounts, images and statuses that no decision reads. Decoded through this schema (msgspec, with
``TypedDict``: plain dicts, unknown keys skipped without being built), a list of Pods costs a
third of a full decode and holds the same records; the unit tests check that every key
``parse_pod`` reads is here. Subtrees a parser reads whole (placement, volume sources) are
kept whole.
"""

from __future__ import annotations

from typing import Any, Final, TypedDict

import msgspec
import orjson


class _OwnerReference(TypedDict, total=False):
    kind: str
    name: str
    controller: bool


class _Metadata(TypedDict, total=False):
    name: str
    namespace: str
    uid: str
    resourceVersion: str
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[_OwnerReference]
    creationTimestamp: str
    deletionTimestamp: str


class _Resources(TypedDict, total=False):
    requests: dict[str, Any]
    limits: dict[str, Any]


class _Container(TypedDict, total=False):
    resources: _Resources
    restartPolicy: str


class _Volume(TypedDict, total=False):
    emptyDir: Any
    hostPath: Any
    persistentVolumeClaim: Any


class _Spec(TypedDict, total=False):
    nodeName: str
    schedulerName: str
    priority: int
    priorityClassName: str
    containers: list[_Container]
    initContainers: list[_Container]
    overhead: dict[str, Any]
    volumes: list[_Volume]
    nodeSelector: Any
    affinity: Any
    tolerations: Any
    topologySpreadConstraints: Any


class _Condition(TypedDict, total=False):
    type: str
    status: str


class _Waiting(TypedDict, total=False):
    reason: str
    message: str


class _State(TypedDict, total=False):
    waiting: _Waiting


class _ContainerStatus(TypedDict, total=False):
    state: _State


class _Status(TypedDict, total=False):
    phase: str
    conditions: list[_Condition]
    initContainerStatuses: list[_ContainerStatus]
    containerStatuses: list[_ContainerStatus]


class Pod(TypedDict, total=False):
    metadata: _Metadata
    spec: _Spec
    status: _Status


_ListMetadata = TypedDict("_ListMetadata", {"resourceVersion": str, "continue": str},
                          total=False)


class _PodList(TypedDict, total=False):
    metadata: _ListMetadata
    items: list[Pod]


_POD_LIST: Final = msgspec.json.Decoder(_PodList)


def decode_pod_list(data: bytes) -> Any:
    """A list of Pods (or one page of it) holding only the schema's fields; an answer of
    another shape (a field of an unexpected type) decoded whole, for the parser to judge as
    it judges any object, and one that is not JSON raising orjson's error as any answer."""
    try:
        return _POD_LIST.decode(data)
    except msgspec.DecodeError:  # ValidationError included
        return orjson.loads(data)
