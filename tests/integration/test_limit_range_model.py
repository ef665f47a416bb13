"""The LimitRange model the controller checks resource plans with, against the API server's
own LimitRanger: each Pod is admitted by the real API server exactly when the model finds no
violation, and each case says which it must be. The cases are the ones the Pod's totals make
subtle: init containers that run alone, sidecars that run throughout, requests left to
default to their limits."""

from __future__ import annotations

from typing import Any

import pytest

from compaction.limit_range import Container, parse_limit_range, violations
from compaction.quantity import parse_quantity
from localcluster import ApiError, Kube
from localcluster.cluster.kube import path

RATIO_4 = [{"type": "Pod", "maxLimitRequestRatio": {"cpu": "4"}}]
MAX_1GI = [{"type": "Pod", "max": {"memory": "1Gi"}}]


def _container(name: str, requests: dict[str, str], limits: dict[str, str],
               sidecar: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "registry.k8s.io/pause:3.10",
                         "resources": {"requests": requests, "limits": limits}}
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


def _gi(requests: str, sidecar: bool = False, name: str = "setup") -> dict[str, Any]:
    return _container(name, {"memory": requests}, {"memory": requests}, sidecar)


APP_512 = _container("app", {"memory": "512Mi"}, {"memory": "512Mi"})

CASES = [
    pytest.param(RATIO_4, [_container("app", {"cpu": "500m"}, {"cpu": "1"})],
                 [_container("setup", {"cpu": "100m"}, {"cpu": "2"})], True,
                 id="init-container-at-the-ratio-4"),
    pytest.param(RATIO_4, [_container("app", {"cpu": "400m"}, {"cpu": "1"})],
                 [_container("setup", {"cpu": "100m"}, {"cpu": "2"})], False,
                 id="init-container-makes-the-ratio-5"),
    pytest.param(RATIO_4, [_container("app", {"cpu": "400m"}, {"cpu": "1"})], [], True,
                 id="without-the-init-container-2.5"),
    pytest.param(RATIO_4, [_container("app", {"cpu": "100m"}, {"cpu": "300m"})],
                 [_container("proxy", {"cpu": "100m"}, {"cpu": "600m"}, sidecar=True)], False,
                 id="sidecar-adds-to-the-sums-4.5"),
    pytest.param(RATIO_4, [_container("app", {"cpu": "200m"}, {"cpu": "300m"})],
                 [_container("proxy", {"cpu": "100m"}, {"cpu": "600m"}, sidecar=True)], True,
                 id="sidecar-adds-to-the-sums-3"),
    pytest.param(RATIO_4, [_container("app", {}, {"cpu": "1"})],
                 [_container("setup", {"cpu": "100m"}, {"cpu": "3"})], True,
                 id="request-defaulted-to-its-limit-3"),
    pytest.param(MAX_1GI, [APP_512], [_gi("768Mi")], True,
                 id="init-container-runs-alone-within-max"),
    pytest.param(MAX_1GI, [APP_512], [_gi("600Mi", sidecar=True, name="proxy")], False,
                 id="sidecar-runs-beside-over-max"),
    pytest.param(MAX_1GI, [APP_512], [_gi("256Mi", sidecar=True, name="proxy"), _gi("800Mi")],
                 False, id="init-container-beside-an-earlier-sidecar-over-max"),
    pytest.param(MAX_1GI, [APP_512], [_gi("800Mi"), _gi("256Mi", sidecar=True, name="proxy")],
                 True, id="init-container-before-the-sidecar-within-max"),
]


def _as_model(c: dict[str, Any]) -> Container:
    res = c["resources"]
    return Container(c["name"], {k: parse_quantity(v) for k, v in res["requests"].items()},
                     {k: parse_quantity(v) for k, v in res["limits"].items()},
                     c.get("restartPolicy") == "Always")


@pytest.mark.parametrize(("limits", "containers", "inits", "admitted"), CASES)
def test_the_model_refuses_exactly_what_the_api_server_refuses(
        kube: Kube, namespace: str, limits: list[dict[str, Any]],
        containers: list[dict[str, Any]], inits: list[dict[str, Any]], admitted: bool) -> None:
    obj = {"metadata": {"name": "caps"}, "spec": {"limits": limits}}
    kube.create(path("limitranges", namespace), obj)
    found = violations([_as_model(c) for c in containers],
                       [parse_limit_range({**obj, "metadata": {
                           "namespace": namespace, "name": "caps", "resourceVersion": "1"}})],
                       [_as_model(c) for c in inits])
    pod = {"metadata": {"generateName": "probe-"},
           "spec": {"containers": containers, "initContainers": inits}}
    try:
        kube.create(path("pods", namespace), pod, dry_run=True)
    except ApiError as e:
        assert e.status == 403, e.message
        assert not admitted, f"the API server refused: {e.message}"
        assert found, f"the API server refused what the model allows: {e.message}"
        return
    assert admitted, "the API server admitted it"
    assert not found, f"the model refuses what the API server admits: {sorted(found)}"
