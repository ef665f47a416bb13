"""The webhook's only API-server I/O: GET one object by path with its own credentials."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from webhook.credentials import Credentials, from_kubeconfig, in_cluster
from webhook.owners import LookupFailed


class KubeReader:
    def __init__(self, credentials: Credentials, timeout: float = 1.5) -> None:
        self._creds = credentials
        self._session = aiohttp.ClientSession(
            base_url=credentials.server + "/",
            connector=aiohttp.TCPConnector(ssl=credentials.tls, limit=64),
            timeout=aiohttp.ClientTimeout(total=timeout),
        )
        self.requests = 0

    @classmethod
    async def from_environment(cls, kubeconfig: str | None, timeout: float) -> KubeReader:
        """In-cluster service-account credentials, or the given kubeconfig file."""
        return cls(from_kubeconfig(kubeconfig) if kubeconfig else in_cluster(), timeout)

    async def get(self, path: str) -> dict[str, Any] | None:
        """The object, None when it does not exist; LookupFailed for anything else."""
        self.requests += 1
        headers = {"Accept": "application/json"}
        token = self._creds.authorization()
        if token:
            headers["Authorization"] = token
        try:
            async with self._session.get(path.lstrip("/"), headers=headers) as resp:
                body = await resp.read()
                if resp.status == 404:
                    return None
                if resp.status != 200:
                    raise LookupFailed(f"GET {path}: HTTP {resp.status}: {body[:200]!r}")
        except (aiohttp.ClientError, TimeoutError) as e:
            raise LookupFailed(f"GET {path}: {type(e).__name__}: {e}") from e
        obj = orjson.loads(body)
        return obj if isinstance(obj, dict) else None

    async def close(self) -> None:
        await self._session.close()
