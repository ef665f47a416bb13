"""The extender's image: the controller's own, read from its Pod once at start (the API's GET
is replaced by a fake here, the boundary under test)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from controller.kubeapi.client import ApiError
from controller.process.manager import own_image, with_extender_image
from controller.process.settings import load


@pytest.mark.parametrize(("pod", "image"), [
    ({"spec": {"containers": [{"name": "sidecar", "image": "mesh:1"},
                              {"name": "controller", "image": "mirror/compactor:0.1.0"}]}},
     "mirror/compactor:0.1.0"),
    ({"spec": {"containers": [{"name": "renamed", "image": "compactor@sha256:ab"}]}},
     "compactor@sha256:ab"),
    ({"spec": {"containers": []}}, None),
    ({"spec": {"containers": [{"name": "controller"}]}}, None),
    (None, None),
])
def test_own_image_is_the_controller_containers(pod: dict[str, Any] | None,
                                                image: str | None) -> None:
    assert own_image(pod) == image


class FakeApi:
    def __init__(self, answer: dict[str, Any] | None | ApiError) -> None:
        self.answer = answer
        self.paths: list[str] = []

    async def get_or_none(self, path: str) -> dict[str, Any] | None:
        self.paths.append(path)
        if isinstance(self.answer, ApiError):
            raise self.answer
        return self.answer


POD = {"spec": {"containers": [{"name": "controller", "image": "registry.example/c:1"}]}}


@pytest.mark.asyncio
@pytest.mark.parametrize(("env", "answer", "image", "asked"), [
    ({"POD_NAME": "c-1"}, POD, "registry.example/c:1", True),
    ({"POD_NAME": "c-1"}, None, None, True),
    ({"POD_NAME": "c-1"}, ApiError(403, "Forbidden", "pods is forbidden"), None, True),
    ({"POD_NAME": "c-1", "COMPACTOR_EXTENDER_IMAGE": "set:1"}, POD, "set:1", False),
])
async def test_extender_image_from_this_pod_with_a_fake_api(
        env: dict[str, str], answer: Any, image: str | None, asked: bool) -> None:
    settings = load({"COMPACTOR_NAMESPACE": "ops", **env})
    api = FakeApi(answer)
    found = await with_extender_image(api, settings)  # type: ignore[arg-type]
    assert found.plan.runtime.extender_image == image
    assert api.paths == (["/api/v1/namespaces/ops/pods/c-1"] if asked else [])
    assert dataclasses.replace(found.plan, runtime=settings.plan.runtime) == settings.plan
