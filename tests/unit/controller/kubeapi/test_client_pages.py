"""A paginated list through ``Api.pages`` against a stand-in for kubernetes-asyncio's
``ApiClient`` (the boundary this file tests): pages in order, each asked for with the last
one's continue token, and the next one asked for before the caller has finished this one."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from kubernetes_asyncio.client import ApiClient

from controller.kubeapi.client import Api, ApiError
from tests.unit.client_response import Response


class _Pages:
    """Three pages of one list; page ``fail`` (if any) answers 410."""

    def __init__(self, fail: int | None = None) -> None:
        self.asked: list[str] = []
        self.fail = fail

    async def call_api(self, path: str, method: str, *args: Any,
                       query_params: list[tuple[str, str]], **kwargs: Any) -> Response:
        token = dict(query_params).get("continue", "")
        self.asked.append(token)
        page = int(token or 0)
        await asyncio.sleep(0)
        if page == self.fail:
            return Response(410, {"reason": "Expired", "message": "too old"})
        return Response(200, {"metadata": {"resourceVersion": "7",
                                           "continue": str(page + 1) if page < 2 else ""},
                              "items": [{"page": page}]})


@pytest.mark.asyncio
async def test_pages_from_a_mocked_client_come_in_order_and_the_next_is_asked_for_early(
) -> None:
    client = _Pages()
    seen = []
    async for items, version in Api(cast(ApiClient, client)).pages("/api/v1/pods", limit=1):
        await asyncio.sleep(0.01)  # the caller parses; the next page is on its way meanwhile
        seen.append((items, version, list(client.asked)))
    assert [s[0] for s in seen] == [[{"page": 0}], [{"page": 1}], [{"page": 2}]]
    assert {s[1] for s in seen} == {"7"}
    # While the caller held page 0, page 1 had been asked for already; never page 3.
    assert [s[2] for s in seen] == [["", "1"], ["", "1", "2"], ["", "1", "2"]]


@pytest.mark.asyncio
async def test_a_failed_page_from_a_mocked_client_raises_after_the_pages_before_it() -> None:
    client = _Pages(fail=1)
    seen = []
    with pytest.raises(ApiError) as e:
        async for items, _ in Api(cast(ApiClient, client)).pages("/api/v1/pods", limit=1):
            seen.append(items)
    assert e.value.status == 410 and seen == [[{"page": 0}]]


@pytest.mark.asyncio
async def test_a_caller_that_stops_early_with_a_mocked_client_leaves_no_request_behind(
) -> None:
    client = _Pages()
    pages = Api(cast(ApiClient, client)).pages("/api/v1/pods", limit=1)
    async for _ in pages:
        break
    await pages.aclose()  # type: ignore[attr-defined]
    assert client.asked in (["", "1"], [""])  # page 1 cancelled, sent or not yet
    assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
