"""A list whose continue page the API server's watch cache is behind ("Too large resource
version", a 504): ``Api.pages`` against mocked API server answers at the HTTP boundary (a
stand-in for kubernetes-asyncio's ``ApiClient.call_api``), with the waits recorded.

The answers are the API server's own: ``storage.NewTooLargeResourceVersionError`` (a Timeout
Status with the cause ``ResourceVersionTooLarge`` and retryAfterSeconds 1), the same message
without the cause as servers before 1.17 sent it, and other 504s that are not it."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import pytest
from kubernetes_asyncio.client import ApiClient

from controller.kubeapi.client import (
    BEHIND_ATTEMPTS,
    Api,
    ApiError,
    SnapshotNotServed,
    cache_behind,
)
from controller.read.reader import PODS, Reader
from tests.unit.client_response import Response

MESSAGE = "Timeout: Too large resource version: 12600, current: 10792"
TOO_LARGE = Response(504, {
    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
    "message": MESSAGE, "reason": "Timeout",
    "details": {"causes": [{"reason": "ResourceVersionTooLarge",
                            "message": "Too large resource version"}],
                "retryAfterSeconds": 1},
    "code": 504}, {"Retry-After": "1"}, "Gateway Timeout")
# Before 1.17 the Status named no cause: only its message says what it is.
TOO_LARGE_OLD = Response(504, {"kind": "Status", "status": "Failure", "message": MESSAGE,
                               "reason": "Timeout", "details": {"retryAfterSeconds": 1},
                               "code": 504})
# The API server's own request timeout, and a proxy's in front of it: not the watch cache.
REQUEST_TIMEOUT = Response(504, {
    "kind": "Status", "status": "Failure", "reason": "Timeout", "code": 504,
    "message": "Timeout: request did not complete within the allotted timeout",
    "details": {"causes": [{"reason": "UnexpectedServerResponse",
                            "message": "context deadline exceeded"}],
                "retryAfterSeconds": 2}})
PROXY_TIMEOUT = Response(504, b"<html><body>504 Gateway Time-out</body></html>",
                         reason="Gateway Timeout")
# The cause under another status is not the watch cache's answer either.
NOT_A_TIMEOUT = Response(500, {"kind": "Status", "status": "Failure", "reason": "InternalError",
                               "message": "Too large resource version", "code": 500})


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "shop", "name": name, "uid": name,
                         "resourceVersion": "12600"},
            "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}


class MockedApiServer:
    """Three pages of Pods (tokens "", "1", "2"), every other path an empty list. ``script``
    maps a continue token to the answers its requests get first, in order, before the page."""

    def __init__(self, script: Mapping[str, Sequence[Response]]) -> None:
        self.script = {token: list(answers) for token, answers in script.items()}
        self.asked: list[dict[str, str]] = []  # each Pod request's query

    async def call_api(self, path: str, method: str, *args: Any,
                       query_params: list[tuple[str, str]], **kwargs: Any) -> Response:
        await asyncio.sleep(0)
        if path != PODS:
            return Response(200, {"metadata": {"resourceVersion": "12600"}, "items": []})
        query = dict(query_params)
        self.asked.append(query)
        token = query.get("continue", "")
        if self.script.get(token):
            return self.script[token].pop(0)
        page = int(token or 0)
        return Response(200, {"metadata": {"resourceVersion": "12600",
                                           "continue": str(page + 1) if page < 2 else ""},
                              "items": [pod(f"web-{page}")]})

    def tokens(self) -> list[str]:
        return [q.get("continue", "") for q in self.asked]


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waits: list[float] = []
    real = asyncio.sleep

    async def sleep(seconds: float) -> None:
        if seconds:
            waits.append(seconds)
        await real(0)
    monkeypatch.setattr(asyncio, "sleep", sleep)
    return waits


@dataclass(frozen=True)
class Case:
    name: str
    script: Mapping[str, Sequence[Response]]
    tokens: Sequence[str]  # the continue token of each request, in order
    behind: int  # answers taken for the watch cache's
    slept: Sequence[float]
    pages: Sequence[str]  # the Pods handed over, page by page
    raised: int | None = None  # the status raised, if the list fails


ALL_OK = ["web-0", "web-1", "web-2"]
CASES = [
    Case("a continue page behind twice is sent again, after the second the server asked",
         {"1": [TOO_LARGE, TOO_LARGE]}, ["", "1", "1", "1", "2"], 2, [1.0, 1.0], ALL_OK),
    Case("the message alone, as servers before 1.17 sent it, is recognised",
         {"2": [TOO_LARGE_OLD]}, ["", "1", "2", "2"], 1, [1.0], ALL_OK),
    Case(f"behind {BEHIND_ATTEMPTS} times: a 410, so that the caller lists from the start",
         {"1": [TOO_LARGE] * BEHIND_ATTEMPTS}, ["", *["1"] * BEHIND_ATTEMPTS],
         BEHIND_ATTEMPTS, [1.0] * (BEHIND_ATTEMPTS - 1), ["web-0"], raised=410),
    Case("a first page behind (an older server) is retried, then raised as it came",
         {"": [TOO_LARGE] * BEHIND_ATTEMPTS}, [""] * BEHIND_ATTEMPTS,
         BEHIND_ATTEMPTS, [1.0] * (BEHIND_ATTEMPTS - 1), [], raised=504),
    Case("the API server's own request timeout is no watch cache behind: raised at once",
         {"1": [REQUEST_TIMEOUT]}, ["", "1"], 0, [], ["web-0"], raised=504),
    Case("a proxy's 504 is raised at once", {"1": [PROXY_TIMEOUT]}, ["", "1"], 0, [],
         ["web-0"], raised=504),
    Case("the message under another status is raised at once", {"1": [NOT_A_TIMEOUT]},
         ["", "1"], 0, [], ["web-0"], raised=500),
]


@pytest.mark.asyncio
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_list_pages_with_mocked_api_server_answers(case: Case, slept: list[float]
                                                         ) -> None:
    server = MockedApiServer(case.script)
    api = Api(cast(ApiClient, server))
    got: list[str] = []
    raised: ApiError | None = None
    try:
        async for items, version in api.pages(PODS, limit=1):
            got += [i["metadata"]["name"] for i in items]
            assert version == "12600"
    except ApiError as e:
        raised = e
    assert (got, server.tokens(), api.behind, slept) == (
        list(case.pages), list(case.tokens), case.behind, list(case.slept))
    assert (raised.status if raised else None) == case.raised
    # No request names a resourceVersion: the first page is a consistent read, and a
    # continue page's snapshot is the one its token names.
    assert not [q for q in server.asked if "resourceVersion" in q]
    if case.raised == 410:
        assert isinstance(raised, SnapshotNotServed)
        assert MESSAGE in raised.message and "from the start" in raised.message
    elif raised is not None:
        assert not isinstance(raised, SnapshotNotServed)
    assert raised is None or raised.path == PODS  # the plugin's error names what failed


@pytest.mark.asyncio
async def test_the_reader_lists_again_from_the_start_with_mocked_api_server_behind(
        slept: list[float]) -> None:
    """The controller's reader (and so the plugin's, which lists through the same
    ``Reader._cached``), through the real ``Api``: the continue page the cache stays behind
    ends the list with a 410, and the list starts again with a first page that names
    neither a continue token nor a resourceVersion; no Pod counted twice."""
    server = MockedApiServer({"1": [TOO_LARGE] * BEHIND_ATTEMPTS})
    api = Api(cast(ApiClient, server))
    snapshot = await Reader(api).read()
    assert sorted(p.name for p in snapshot.pods) == ALL_OK
    again = BEHIND_ATTEMPTS + 1
    assert server.tokens() == ["", *["1"] * BEHIND_ATTEMPTS, "", "1", "2"]
    assert server.asked[again] == {"limit": server.asked[0]["limit"]}  # a fresh list
    assert api.behind == BEHIND_ATTEMPTS


@pytest.mark.asyncio
async def test_the_reader_gives_up_with_mocked_api_server_behind_every_time(
        slept: list[float]) -> None:
    """Bounded: a cache that stays behind through the reader's second list fails the read
    (the next pass tries again) after 2 x BEHIND_ATTEMPTS tries of the continue page."""
    server = MockedApiServer({"1": [TOO_LARGE] * (2 * BEHIND_ATTEMPTS)})
    api = Api(cast(ApiClient, server))
    with pytest.raises(ApiError) as e:
        await Reader(api).read()
    assert e.value.status == 410 and isinstance(e.value, SnapshotNotServed)
    assert server.tokens().count("1") == 2 * BEHIND_ATTEMPTS
    assert len(slept) == 2 * (BEHIND_ATTEMPTS - 1) and max(slept) <= 5.0


@pytest.mark.parametrize(("answer", "behind"), [
    (TOO_LARGE, True), (TOO_LARGE_OLD, True), (REQUEST_TIMEOUT, False),
    (PROXY_TIMEOUT, False), (NOT_A_TIMEOUT, False),
], ids=["cause", "message", "request-timeout", "proxy", "not-504"])
@pytest.mark.asyncio
async def test_mocked_api_server_answers_recognised(answer: Response, behind: bool) -> None:
    e = ApiError.from_answer(answer.status, answer.reason, await answer.read())
    assert cache_behind(e) is behind


def test_a_watch_error_event_from_mocked_api_server_keeps_its_causes() -> None:
    """A watch's ERROR event is a Status too: read the same way as an answer's body."""
    status = {"kind": "Status", "code": 504, "reason": "Timeout", "message": MESSAGE,
              "details": {"causes": [{"reason": "ResourceVersionTooLarge"}],
                          "retryAfterSeconds": 9}}
    e = ApiError.from_status(504, "", status)
    assert cache_behind(e) and e.retry_seconds == 5.0  # capped as a Retry-After is
    assert (e.reason, e.message) == ("Timeout", MESSAGE)
