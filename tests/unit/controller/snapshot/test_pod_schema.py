"""Pods decoded through ``controller.snapshot.pod_schema`` give the records a whole decode gives:
every key ``parse_pod`` and an informer read is in the schema (recorded on a rich Pod), and
generated Pods, with unknown fields and fields of unexpected types, parse alike either way."""

from __future__ import annotations

import copy
import typing
from typing import Any, cast

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.kubeapi.client import WatchApi
from controller.kubeapi.informer import Informer, Source
from controller.snapshot import pod_schema
from controller.snapshot.pod import parse_pod

RICH: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {
        "name": "web-1", "namespace": "shop", "uid": "u-1", "resourceVersion": "42",
        "generation": 1, "creationTimestamp": "2026-12-01T10:00:00Z",
        "deletionTimestamp": "2026-12-01T11:00:00Z",
        "labels": {"app": "web"}, "annotations": {"a": "b"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                             "uid": "u-rs", "controller": True}],
        "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}]},
    "spec": {
        "nodeName": "n1", "schedulerName": "compactor-scheduler", "priority": 100,
        "priorityClassName": "high", "serviceAccountName": "default",
        "initContainers": [
            {"name": "side", "restartPolicy": "Always", "image": "i",
             "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "64Mi"}}},
            {"name": "init", "image": "i", "resources": {"requests": {"cpu": "2"}}}],
        "containers": [{"name": "app", "image": "i", "volumeMounts": [{"name": "v"}],
                        "resources": {"requests": {"cpu": "250m", "memory": "1Gi"},
                                      "limits": {"cpu": "1", "ephemeral-storage": "1Gi"}}}],
        "overhead": {"cpu": "10m"},
        "volumes": [{"name": "e", "emptyDir": {}}, {"name": "h", "hostPath": {"path": "/x"}},
                    {"name": "c", "persistentVolumeClaim": {"claimName": "data"}},
                    {"name": "p", "projected": {"sources": []}}],
        "nodeSelector": {"zone": "a"},
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname",
             "labelSelector": {"matchLabels": {"app": "web"}}}]}},
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                       "whenUnsatisfiable": "DoNotSchedule",
                                       "labelSelector": {"matchLabels": {"app": "web"}}}]},
    "status": {
        "phase": "Running", "podIP": "10.0.0.1",
        "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": None}],
        "initContainerStatuses": [{"name": "init", "state": {"terminated": {"exitCode": 0}}}],
        "containerStatuses": [{"name": "app", "image": "i", "state": {"waiting": {
            "reason": "ImagePullBackOff", "message": "no such image"}}}]},
}


def _page(*pods: Any) -> bytes:
    return orjson.dumps({"kind": "PodList", "metadata": {"resourceVersion": "7",
                                                         "continue": "next"},
                         "items": list(pods)})


class _Recorder(dict[str, Any]):
    """A dict that records every key read from it, and from what it holds, by path."""

    def __init__(self, raw: dict[str, Any], path: tuple[str, ...], read: set[tuple[str, ...]]
                 ) -> None:
        super().__init__({k: _record(v, (*path, k), read) for k, v in raw.items()})
        self.path, self.read = path, read

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add((*self.path, key))
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add((*self.path, key))
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.read.add((*self.path, str(key)))
        return super().__contains__(key)


def _record(value: Any, path: tuple[str, ...], read: set[tuple[str, ...]]) -> Any:
    if isinstance(value, dict):
        return _Recorder(value, path, read)
    if isinstance(value, list):
        return [_record(v, (*path, "[]"), read) for v in value]
    return value


def _in_schema(path: tuple[str, ...], kind: Any = pod_schema.Pod) -> bool:
    """Whether the schema keeps the value at ``path``: a key it declares, inside a list or
    map it declares, or anywhere under a subtree it keeps whole."""
    if not path or kind is Any:
        return True
    origin = typing.get_origin(kind)
    if origin is list:
        return path[0] == "[]" and _in_schema(path[1:], typing.get_args(kind)[0])
    if origin is dict:
        return _in_schema(path[1:], typing.get_args(kind)[1])
    hints = typing.get_type_hints(kind)
    return path[0] in hints and _in_schema(path[1:], hints[path[0]])


def test_every_key_parse_pod_and_the_informer_read_is_in_the_schema() -> None:
    read: set[tuple[str, ...]] = set()
    informer = Informer(cast(WatchApi, None), "/api/v1/pods", parse_pod,
                        selector="app=web")
    pod = _record(copy.deepcopy(RICH), (), read)
    assert informer.put(pod) and Source(parse_pod, selector="app=web").selects(pod)
    assert len(read) > 20  # the recorder saw the reads
    assert sorted(p for p in read if not _in_schema(p)) == []


def test_a_rich_pod_parses_alike_decoded_whole_or_through_the_schema() -> None:
    trimmed = pod_schema.decode_pod_list(_page(RICH))
    assert trimmed["metadata"] == {"resourceVersion": "7", "continue": "next"}
    (pod,) = trimmed["items"]
    assert "managedFields" not in pod["metadata"] and "image" not in pod["spec"]["containers"][0]
    assert parse_pod(pod) == parse_pod(RICH)


def test_an_answer_of_another_shape_is_decoded_whole_and_garbage_still_fails() -> None:
    odd = copy.deepcopy(RICH)
    odd["spec"]["priority"] = "high"  # not an integer: the parser, not the decoder, judges
    page = pod_schema.decode_pod_list(_page(odd))
    assert page["items"][0]["metadata"]["managedFields"]  # decoded whole
    assert parse_pod(page["items"][0]) == parse_pod(odd)
    with pytest.raises(orjson.JSONDecodeError):
        pod_schema.decode_pod_list(b"<html>proxy error</html>")


_json = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1)
                     | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)
_quantity = st.sampled_from(["100m", "1", "2Gi", "512Mi", "0", "1.5", "3k"])
_resources = st.fixed_dictionaries({}, optional={
    "requests": st.dictionaries(st.sampled_from(["cpu", "memory", "pods"]), _quantity),
    "limits": st.dictionaries(st.sampled_from(["cpu", "memory"]), _quantity)})
_container = st.fixed_dictionaries({"name": st.text(max_size=3)}, optional={
    "resources": _resources, "restartPolicy": st.sampled_from(["Always", "Never"]),
    "image": st.text(max_size=5), "extra": _json})


@st.composite
def _pods(draw: st.DrawFn) -> dict[str, Any]:
    """The rich Pod with some fields dropped, others redrawn, and unknown ones added."""
    pod = copy.deepcopy(RICH)
    for section in ("metadata", "spec", "status"):
        for key in draw(st.lists(st.sampled_from(sorted(pod[section])), max_size=4)):
            pod[section].pop(key, None)
        pod[section].update(draw(st.dictionaries(st.sampled_from(["x1", "x2"]), _json,
                                                 max_size=2)))
    pod["spec"]["containers"] = draw(st.lists(_container, max_size=3))
    pod["spec"]["initContainers"] = draw(st.lists(_container, max_size=2))
    pod["spec"]["priority"] = draw(st.integers(-10, 10**9) | st.none())
    pod["status"]["containerStatuses"] = draw(st.lists(st.fixed_dictionaries({}, optional={
        "state": st.fixed_dictionaries({}, optional={"waiting": st.fixed_dictionaries(
            {}, optional={"reason": st.sampled_from(["CrashLoopBackOff", "ContainerCreating"]),
                          "message": st.text(max_size=5)})}),
        "name": st.text(max_size=3)}), max_size=2))
    return pod


@settings(max_examples=100, deadline=None)
@given(st.lists(_pods(), min_size=1, max_size=3))
def test_generated_pods_parse_alike_decoded_whole_or_through_the_schema(
        pods: list[dict[str, Any]]) -> None:
    page = _page(*pods)
    whole = [parse_pod(p) for p in orjson.loads(page)["items"]]
    assert [parse_pod(p) for p in pod_schema.decode_pod_list(page)["items"]] == whole
