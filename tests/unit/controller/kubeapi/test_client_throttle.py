"""429 answers are waited out and sent again, and answers are decoded: ``Api.request``
against a stand-in for kubernetes-asyncio's ``ApiClient`` (the boundary this file tests), with
the sleeps recorded."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import aiohttp
import pytest
from kubernetes_asyncio.client import ApiClient

from controller.kubeapi.client import (
    THROTTLE_ATTEMPTS,
    TIMED_OUT,
    UNREACHABLE,
    Api,
    ApiError,
    retry_after,
)
from tests.unit.client_response import Response


class _Client:
    """Answers 429 ``throttles`` times, then 200."""

    def __init__(self, throttles: int, retry: str | None = "2", status: int = 429) -> None:
        self.throttles, self.retry, self.status, self.calls = throttles, retry, status, 0

    async def call_api(self, *args: Any, **kwargs: Any) -> Response:
        self.calls += 1
        if self.calls <= self.throttles:
            return Response(self.status, b'{"reason": "TooManyRequests", "message": '
                            b'"storage is (re)initializing"}',
                            {"Retry-After": self.retry} if self.retry is not None else {},
                            "Too Many Requests")
        return Response(200, {"ok": True})


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
    monkeypatch.setattr(asyncio, "sleep", sleep)
    return waits


@pytest.mark.asyncio
async def test_a_throttled_request_with_mocked_client_is_sent_again_after_retry_after(
        slept: list[float]) -> None:
    client = _Client(throttles=2)
    api = Api(cast(ApiClient, client))
    assert await api.request("PATCH", "/api/v1/namespaces/a/pods/p", {}) == {"ok": True}
    assert (client.calls, api.requests, api.throttled, slept) == (3, 3, 2, [2.0, 2.0])


@pytest.mark.asyncio
async def test_throttling_past_the_last_attempt_with_mocked_client_raises_the_429(
        slept: list[float]) -> None:
    client = _Client(throttles=THROTTLE_ATTEMPTS)
    api = Api(cast(ApiClient, client))
    with pytest.raises(ApiError) as e:
        await api.request("GET", "/api/v1/pods")
    assert e.value.status == 429 and "storage" in e.value.message
    assert e.value.path == "/api/v1/pods"  # named in errors, where lists run side by side
    assert client.calls == THROTTLE_ATTEMPTS and len(slept) == THROTTLE_ATTEMPTS - 1


@pytest.mark.asyncio
async def test_other_errors_with_mocked_client_are_not_retried(slept: list[float]) -> None:
    client = _Client(throttles=1, status=409)
    api = Api(cast(ApiClient, client))
    with pytest.raises(ApiError) as e:
        await api.request("POST", "/api/v1/namespaces/a/pods", {})
    assert e.value.status == 409 and client.calls == 1 and slept == [] and api.throttled == 0


@pytest.mark.parametrize(("headers", "seconds"), [
    ({"Retry-After": "1"}, 1.0), ({"Retry-After": "0"}, 0.0), ({"Retry-After": "3600"}, 5.0),
    ({"Retry-After": "soon"}, 1.0), ({}, 1.0), (None, 1.0), ({"Retry-After": "-4"}, 0.0),
])
def test_retry_after_is_read_and_capped(headers: dict[str, str] | None, seconds: float) -> None:
    assert retry_after(headers) == seconds


class _Unreachable:
    """Raises what aiohttp raises when nothing listens, or when a connection is reset."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def call_api(self, *args: Any, **kwargs: Any) -> Response:
        raise self.error


@pytest.mark.asyncio
@pytest.mark.parametrize(("error", "reason"), [
    (aiohttp.ClientConnectionError("Cannot connect to host 127.0.0.1:6443"), "Unreachable"),
    (ConnectionResetError(104, "Connection reset by peer"), "Unreachable"),
    (TimeoutError(), TIMED_OUT)], ids=["refused", "reset", "timeout"])
async def test_no_answer_from_a_mocked_client_is_an_api_error_not_a_crash(
        error: Exception, reason: str) -> None:
    api = Api(cast(ApiClient, _Unreachable(error)))
    with pytest.raises(ApiError) as e:
        await api.request("GET", "/apis/coordination.k8s.io/v1/namespaces/x/leases/y")
    assert e.value.status == UNREACHABLE and e.value.reason == reason
    assert "/leases/y" in e.value.message


class _Answer:
    def __init__(self, response: Response) -> None:
        self.response = response

    async def call_api(self, *args: Any, **kwargs: Any) -> Response:
        return self.response


@pytest.mark.asyncio
@pytest.mark.parametrize(("response", "expected"), [
    (Response(200, {"items": [{"a": 1}]}), {"items": [{"a": 1}]}),
    (Response(200, b""), {}),  # a DELETE's empty answer
    (Response(200, b"[1, 2]"), {}),  # not an object
], ids=["object", "empty", "list"])
async def test_an_answer_from_a_mocked_client_is_decoded(response: Response,
                                                          expected: dict[str, Any]) -> None:
    assert await Api(cast(ApiClient, _Answer(response))).request("GET", "/x") == expected


@pytest.mark.asyncio
async def test_an_error_answer_from_a_mocked_client_carries_the_status_and_its_message(
) -> None:
    body = b'{"kind":"Status","reason":"Forbidden","message":"pods is forbidden"}'
    with pytest.raises(ApiError) as e:
        await Api(cast(ApiClient, _Answer(Response(403, body, reason="Forbidden")))).request(
            "GET", "/api/v1/pods")
    assert (e.value.status, e.value.reason, e.value.message) == (
        403, "Forbidden", "pods is forbidden")


@pytest.mark.asyncio
async def test_an_answer_that_is_not_json_from_a_mocked_client_is_an_api_error() -> None:
    with pytest.raises(ApiError) as e:
        await Api(cast(ApiClient, _Answer(Response(200, b"<html>")))).request("GET", "/x")
    assert e.value.reason == "Undecodable" and "/x" in e.value.message
