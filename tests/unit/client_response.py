"""A stand-in for the raw aiohttp response that kubernetes-asyncio's ``call_api`` returns
when asked not to preload it: what ``controller.kubeapi.client.Api.request`` reads of one."""

from __future__ import annotations

from typing import Any

import orjson


class Response:
    def __init__(self, status: int = 200, body: Any = None,
                 headers: dict[str, str] | None = None, reason: str = "") -> None:
        self.status, self.reason, self.headers = status, reason, headers or {}
        self._data = body if isinstance(body, bytes) else orjson.dumps(body or {})

    async def read(self) -> bytes:
        return self._data
