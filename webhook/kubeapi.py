"""The webhook's only API-server I/O, with its own credentials: GET one object by path, and
list and watch owners as metadata only (labels, annotations, owner references)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlencode

import aiohttp
import orjson

from webhook.credentials import Credentials, from_kubeconfig, in_cluster
from webhook.errors import LookupFailed, NotServed, WatchExpired

# Server-side conversion to PartialObjectMetadata: a ReplicaSet's pod template never crosses
# the wire, and a list of thousands stays small.
_META_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
_META = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
WATCH_SECONDS = 300


class KubeReader:
    def __init__(self, credentials: Credentials, timeout: float = 1.5) -> None:
        self._creds = credentials
        self._timeout = timeout
        self._session = aiohttp.ClientSession(
            base_url=credentials.server + "/",
            connector=aiohttp.TCPConnector(ssl=credentials.tls, limit=64),
            timeout=aiohttp.ClientTimeout(total=timeout),
        )
        # Watches live for minutes: their own connections, so they never queue lookups.
        self._stream: aiohttp.ClientSession | None = None
        self.requests = 0

    @classmethod
    async def from_environment(cls, kubeconfig: str | None, timeout: float) -> KubeReader:
        """In-cluster service-account credentials, or the given kubeconfig file."""
        return cls(from_kubeconfig(kubeconfig) if kubeconfig else in_cluster(), timeout)

    def _headers(self, accept: str = "application/json") -> dict[str, str]:
        headers = {"Accept": accept}
        token = self._creds.authorization()
        if token:
            headers["Authorization"] = token
        return headers

    async def get(self, path: str) -> dict[str, Any] | None:
        """The object, None when it does not exist; LookupFailed for anything else."""
        self.requests += 1
        status, body = await self._fetch(self._session, path, "application/json")
        if status == 404:
            return None
        if status != 200:
            raise LookupFailed(f"GET {path}: HTTP {status}: {body[:200]!r}")
        return _object(path, body)

    async def _fetch(self, session: aiohttp.ClientSession, url: str, accept: str
                     ) -> tuple[int, bytes]:
        try:
            async with session.get(url.lstrip("/"), headers=self._headers(accept)) as resp:
                return resp.status, await resp.read()
        except (aiohttp.ClientError, TimeoutError) as e:
            raise LookupFailed(f"GET {url}: {type(e).__name__}: {e}") from e

    def _streams(self) -> aiohttp.ClientSession:
        if self._stream is None:
            self._stream = aiohttp.ClientSession(
                base_url=self._creds.server + "/",
                connector=aiohttp.TCPConnector(ssl=self._creds.tls, limit=16),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self._timeout * 4,
                                              sock_read=WATCH_SECONDS + 30))
        return self._stream

    async def list_metadata(self, path: str, page: int = 500
                            ) -> tuple[list[dict[str, Any]], str]:
        """Every object's metadata under ``path``, paginated; and the list's resourceVersion."""
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            query = {"limit": str(page), **({"continue": token} if token else {})}
            body = await self._read(_query(path, query), _META_LIST)
            items.extend(body.get("items") or [])
            meta = body.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                return items, str(meta.get("resourceVersion", ""))

    async def _read(self, url: str, accept: str) -> dict[str, Any]:
        status, body = await self._fetch(self._streams(), url, accept)
        _raise_for(status, url, body)
        return _object(url, body)

    async def watch_metadata(self, path: str, resource_version: str,
                             opened: Callable[[], None] = lambda: None
                             ) -> AsyncIterator[dict[str, Any]]:
        """Watch events from ``resource_version`` (with bookmarks) until the server ends the
        watch; ``opened`` is called once the server has accepted it."""
        query = {"watch": "1", "resourceVersion": resource_version,
                 "allowWatchBookmarks": "true", "timeoutSeconds": str(WATCH_SECONDS)}
        url = _query(path, query)
        try:
            async with self._streams().get(url.lstrip("/"),
                                           headers=self._headers(_META)) as resp:
                if resp.status != 200:
                    _raise_for(resp.status, url, await resp.read())
                opened()
                async for line in resp.content:
                    if not line.strip():
                        continue
                    event = _object(url, line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        _raise_for(int(status.get("code") or 500), url,
                                   str(status.get("message", "")).encode())
                    yield event
        except (aiohttp.ClientError, TimeoutError) as e:
            raise LookupFailed(f"watch {path}: {type(e).__name__}: {e}") from e

    async def close(self) -> None:
        await self._session.close()
        if self._stream is not None:
            await self._stream.close()


def _query(path: str, query: dict[str, str]) -> str:
    """``path`` (which may carry a query of its own, a label selector say) with ``query``."""
    return f"{path}{'&' if '?' in path else '?'}{urlencode(query)}"


def _object(url: str, body: bytes) -> dict[str, Any]:
    """A 200's body as a JSON object; anything else is the API server failing to answer."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise LookupFailed(f"GET {url}: answer is not JSON: {body[:200]!r}") from e
    if not isinstance(obj, dict):
        raise LookupFailed(f"GET {url}: answer is not a JSON object")
    return obj


def _raise_for(status: int, url: str, body: bytes) -> None:
    if status == 200:
        return
    if status == 404:
        raise NotServed(url)
    if status == 410:
        raise WatchExpired(url)
    raise LookupFailed(f"GET {url}: HTTP {status}: {body[:200]!r}")
