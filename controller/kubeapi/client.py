"""The controller's API-server I/O: generic REST on kubernetes-asyncio's ApiClient.

Objects stay plain dicts at this edge and are parsed into our dataclasses by the callers;
every non-2xx answer becomes an ``ApiError`` carrying the status, and no answer at all one
with status 0, mapped here and nowhere else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Final, Protocol, Self

import aiohttp
import orjson
import yaml
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.client.exceptions import ApiException

Obj = dict[str, Any]
Page = tuple[list[Obj], str]  # a list page's items and the list's resourceVersion
Decode = Callable[[bytes], Any]  # an answer's body to its object
FIELD_MANAGER: Final = "compactor-controller"
_PATCH_TYPES: Final = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}
# A 429 (API Priority and Fairness, or storage still initializing) means the request was not
# carried out: it is safe to send again, after the Retry-After the server asked for.
THROTTLE_ATTEMPTS: Final = 4
MAX_RETRY_AFTER: Final = 5.0  # seconds; a longer ask is cut to this
UNREACHABLE: Final = 0  # ApiError.status when no answer came back
TIMED_OUT: Final = "Timeout"  # its reason when none came back in time
PAGE: Final = 500  # objects per page of a paginated list
# "Too large resource version" (504): the watch cache did not reach, in the 3 s the server
# waits, the revision a continue page names (its first page's, read from etcd while the cache
# lagged). Sent again a second later, as asked; past BEHIND_ATTEMPTS the list starts again.
BEHIND_ATTEMPTS: Final = 4
TOO_LARGE_CAUSE: Final = "ResourceVersionTooLarge"
TOO_LARGE_MESSAGE: Final = "Too large resource version"  # servers before 1.18.6 name no cause
log = logging.getLogger("compactor.controller")


def retry_after(headers: Any) -> float:
    """The server's Retry-After in seconds (1 when absent or unreadable), capped."""
    try:
        value = float((headers or {}).get("Retry-After", 1))
    except (TypeError, ValueError):
        value = 1.0
    return min(max(value, 0.0), MAX_RETRY_AFTER)


def without_env_lookups(client: ApiClient) -> ApiClient:
    """The client's HTTP session, with the proxy settings of the environment read once here
    instead of on every request (aiohttp's ``trust_env`` looks them and ~/.netrc up in a
    worker thread per request: a tenth of the controller's CPU while it patches Pods)."""
    rest = client.rest_client
    if rest.proxy is None:
        host = urllib.parse.urlsplit(client.configuration.host).hostname or ""
        proxy = urllib.request.getproxies().get("https")
        if proxy and not urllib.request.proxy_bypass(host):
            rest.proxy = proxy
    old = rest.pool_manager
    connector = old.connector
    old.detach()
    rest.pool_manager = aiohttp.ClientSession(connector=connector, trust_env=False,
                                              read_bufsize=2**21)
    return client


class ApiError(Exception):
    path = ""  # the request's path, set by ``Api.request`` (lists may run side by side)

    def __init__(self, status: int, reason: str, message: str,
                 causes: tuple[str, ...] = (), retry_seconds: float = 1.0) -> None:
        self.status, self.reason, self.message = status, reason, message
        self.causes = causes  # the Status's ``details.causes[].reason``
        self.retry_seconds = retry_seconds  # its ``details.retryAfterSeconds``, capped
        super().__init__(f"HTTP {status} {reason}: {message[:300]}")

    @classmethod
    def from_exception(cls, e: ApiException) -> ApiError:
        return cls.from_answer(int(e.status or 0), str(e.reason or ""), e.body)

    @classmethod
    def from_answer(cls, status: int, phrase: str, body: Any) -> ApiError:
        """The error an answer's Status object names (its reason and message), else the
        HTTP reason phrase."""
        try:
            status_object = orjson.loads(body or b"{}")
        except (orjson.JSONDecodeError, TypeError):
            status_object = None
        return cls.from_status(status, phrase, status_object)

    @classmethod
    def from_status(cls, status: int, phrase: str, status_object: Any) -> ApiError:
        """The error a Status object (an answer's body, or a watch's ERROR event) names."""
        if not isinstance(status_object, dict):
            return cls(status, "", phrase)
        details = d if isinstance(d := status_object.get("details"), dict) else {}
        causes = [c for c in details.get("causes") or () if isinstance(c, dict)]
        return cls(status, str(status_object.get("reason", "")),
                   str(status_object.get("message", phrase)),
                   tuple(str(c.get("reason", "")) for c in causes),
                   retry_after({"Retry-After": details.get("retryAfterSeconds", 1)}))


def cache_behind(e: ApiError) -> bool:
    """Whether the answer is "Too large resource version", the watch cache behind the request;
    any other 504 (a request past the server's own timeout) must not be sent again as it."""
    return e.status == 504 and (TOO_LARGE_CAUSE in e.causes or TOO_LARGE_MESSAGE in e.message)


class SnapshotNotServed(ApiError):
    """A continue page the watch cache stayed behind for ``BEHIND_ATTEMPTS`` tries: a 410 as
    an expired token's (each caller of ``Api.pages`` lists again on one), to start again from
    a first page naming no resourceVersion, which the server reads from etcd if it must."""

    def __init__(self, cause: ApiError, attempts: int) -> None:
        super().__init__(410, "Expired", f"{cause.message} (a continue page, {attempts} "
                         "tries): the API server's watch cache is behind the list's snapshot; "
                         "list again from the start", cause.causes, cause.retry_seconds)
        self.path = cause.path


class ReadApi(Protocol):
    """What reading a snapshot needs."""

    async def list(self, path: str, label_selector: str | None = None
                   ) -> tuple[list[Obj], str]: ...

    def pages(self, path: str, label_selector: str | None = None,
              limit: int = PAGE, decode: Decode = orjson.loads) -> AsyncIterator[Page]: ...

    async def version(self) -> str: ...


class WatchApi(Protocol):
    """What a watch cache needs."""

    def pages(self, path: str, label_selector: str | None = None,
              limit: int = PAGE, decode: Decode = orjson.loads) -> AsyncIterator[Page]: ...

    def watch(self, path: str, resource_version: str, timeout_seconds: int = 300,
              label_selector: str | None = None) -> AsyncIterator[tuple[str, Obj]]: ...


class WriteApi(Protocol):
    """What carrying out a plan needs."""

    async def create(self, path: str, obj: Obj) -> Obj: ...

    async def patch(self, path: str, patch: Any, kind: str = "merge") -> Obj: ...

    async def apply(self, path: str, obj: Obj) -> Obj: ...

    async def delete(self, path: str) -> bool: ...


class KubeconfigError(Exception):
    """A kubeconfig that could not be loaded: unreadable, not YAML, or missing what it names."""


class Api:
    """The one implementation of those protocols, on kubernetes-asyncio."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self.requests = 0  # every request sent, watches included (for the metrics)
        self.watches = 0  # of those, the watches opened: each informer's, renewed every 5-10 min
        self.throttled = 0  # answers of 429, each waited out and sent again
        self.behind = 0  # answers "Too large resource version" (a watch cache behind a list)
        self.timeout = 30.0  # seconds for one request and its answer; 0: no limit

    @classmethod
    async def connect(cls, kubeconfig: str | None) -> Api:
        cfg = Configuration()
        if kubeconfig:
            await kube_config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
        else:
            kube_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        return cls(without_env_lookups(ApiClient(cfg)))

    @classmethod
    async def from_kubeconfig(cls, files: Sequence[str], context: str | None) -> Self:
        """A client from kubeconfig files merged as kubectl merges them, for a command run
        by a person: a token the loader refreshes is never written back to their file."""
        cfg = Configuration()
        try:
            await kube_config.load_kube_config(
                config_file=os.pathsep.join(files), context=context, client_configuration=cfg,
                persist_config=False)
        except (kube_config.ConfigException, OSError, yaml.YAMLError, KeyError, TypeError) as e:
            raise KubeconfigError(str(e)) from e
        return cls(without_env_lookups(ApiClient(cfg)))

    async def close(self) -> None:
        # Connections are dropped, not closed with TLS's goodbye: nothing is lost, and a
        # graceful close could outlast the event loop and leave its socket open.
        session = self.client.rest_client.pool_manager
        if isinstance(session, aiohttp.ClientSession) and session.connector is not None:
            await session.connector.close(abort_ssl=True)
        await self.client.close()

    async def request(self, method: str, path: str, body: Any = None,
                      content_type: str = "application/json",
                      query: dict[str, str] | None = None,
                      decode: Decode = orjson.loads) -> Obj:
        try:
            return await self._request(method, path, body, content_type, query, decode)
        except ApiError as e:
            e.path = e.path or path
            raise

    async def _request(self, method: str, path: str, body: Any, content_type: str,
                       query: dict[str, str] | None, decode: Decode) -> Obj:
        for attempt in range(1, THROTTLE_ATTEMPTS + 1):
            self.requests += 1
            try:
                # The body is read here and decoded with orjson: the client's own decoding
                # (bytes to str, then json) costs half again as much on a page of 500 Pods.
                response = await self.client.call_api(
                    path, method, header_params={"Content-Type": content_type,
                                                 "Accept": "application/json"},
                    body=body, query_params=list((query or {}).items()),
                    auth_settings=["BearerToken"], _preload_content=False,
                    _return_http_data_only=True, _request_timeout=self.timeout)
                data = await response.read()
            except ApiException as e:  # the client refused to send the request at all
                raise ApiError.from_exception(e) from e
            except TimeoutError as e:
                raise ApiError(UNREACHABLE, TIMED_OUT, f"{method} {path}: no answer within "
                               f"{self.timeout:g} s") from e
            except (aiohttp.ClientError, OSError) as e:
                # No answer at all (the API server restarting, a connection reset): an error
                # like any other, so that a pass or a Lease renewal fails and is tried again
                # instead of the process dying.
                raise ApiError(UNREACHABLE, "Unreachable", f"{method} {path}: {e!r}") from e
            if not 200 <= response.status <= 299:
                if response.status != 429 or attempt == THROTTLE_ATTEMPTS:
                    raise ApiError.from_answer(response.status, str(response.reason or ""),
                                               data)
                self.throttled += 1
                await asyncio.sleep(retry_after(response.headers))
                continue
            try:
                result = decode(data) if data else {}
            except orjson.JSONDecodeError as e:
                raise ApiError(response.status, "Undecodable",
                               f"{method} {path}: not JSON: {e}") from e
            return result if isinstance(result, dict) else {}
        raise AssertionError("unreachable")

    async def get(self, path: str) -> Obj:
        return await self.request("GET", path)

    async def get_or_none(self, path: str) -> Obj | None:
        try:
            return await self.get(path)
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    async def list(self, path: str, label_selector: str | None = None) -> tuple[list[Obj], str]:
        query = {"labelSelector": label_selector} if label_selector else None
        out = await self.request("GET", path, query=query)
        return list(out.get("items") or []), str(out.get("metadata", {}).get("resourceVersion", ""))

    async def pages(self, path: str, label_selector: str | None = None,
                    limit: int = PAGE, decode: Decode = orjson.loads) -> AsyncIterator[Page]:
        """A list in pages of ``limit`` (one consistent snapshot): each page's items and the
        list's resourceVersion, each page's body decoded by ``decode`` (e.g. through a schema of
        the fields the caller reads). An expired continue token raises ApiError(410), as does
        one the watch cache stays behind (``SnapshotNotServed``): the caller lists again.

        The next page is asked for before this one is handed over: the API server reads and
        encodes it while the caller parses this one (a large list takes half the time)."""
        def ask(token: str) -> asyncio.Task[Obj]:
            query = {"limit": str(limit)} if limit else {}  # 0: the whole list at once
            if label_selector:
                query["labelSelector"] = label_selector
            if token:
                query["continue"] = token
            return asyncio.ensure_future(self._page(path, query, decode))

        pending: asyncio.Task[Obj] | None = ask("")
        try:
            while pending is not None:
                out = await pending
                meta = out.get("metadata") or {}
                token = str(meta.get("continue") or "")
                pending = ask(token) if token else None
                yield list(out.get("items") or []), str(meta.get("resourceVersion", ""))
        finally:
            if pending is not None:  # the caller stopped early, or a page failed
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError, ApiError):
                    await pending

    async def _page(self, path: str, query: dict[str, str], decode: Decode) -> Obj:
        """One page, sent again while the watch cache is behind it, as client-go's reflector
        does; a first page's "Too large" (only an older server's) is raised after the tries."""
        page = "a continue page" if "continue" in query else "the first page"
        for attempt in range(1, BEHIND_ATTEMPTS + 1):
            try:
                return await self.request("GET", path, query=query, decode=decode)
            except ApiError as e:
                if not cache_behind(e):
                    raise
                self.behind += 1
                if attempt == BEHIND_ATTEMPTS:
                    log.warning("listing %s: %s still not served after %d tries (%s)",
                                path, page, attempt, e.message)
                    if "continue" not in query:
                        raise
                    raise SnapshotNotServed(e, attempt) from e
                log.info("listing %s: the API server's watch cache is behind %s (%s); "
                         "asking again in %g s (try %d of %d)", path, page, e.message,
                         e.retry_seconds, attempt + 1, BEHIND_ATTEMPTS)
                await asyncio.sleep(e.retry_seconds)
        raise AssertionError("unreachable")

    async def create(self, path: str, obj: Obj) -> Obj:
        return await self.request("POST", path, obj)

    async def patch(self, path: str, patch: Any, kind: str = "merge") -> Obj:
        query = {"fieldManager": FIELD_MANAGER}
        if kind == "apply":
            query["force"] = "true"
        return await self.request("PATCH", path, patch, _PATCH_TYPES[kind], query)

    async def apply(self, path: str, obj: Obj) -> Obj:
        """Server-side apply: our field manager owns exactly the fields we send."""
        return await self.patch(path, obj, "apply")

    async def delete(self, path: str) -> bool:
        try:
            await self.request("DELETE", path, {"propagationPolicy": "Background"})
        except ApiError as e:
            if e.status == 404:
                return False
            raise
        return True

    async def version(self) -> str:
        return str((await self.get("/version")).get("gitVersion", ""))

    async def watch(self, path: str, resource_version: str, timeout_seconds: int = 300,
                    label_selector: str | None = None) -> AsyncIterator[tuple[str, Obj]]:
        """Watch events after ``resource_version``; raises ApiError(410) when it has expired."""
        query = [("watch", "1"), ("resourceVersion", resource_version),
                 ("allowWatchBookmarks", "true"), ("timeoutSeconds", str(timeout_seconds))]
        if label_selector:
            query.append(("labelSelector", label_selector))
        self.requests += 1
        self.watches += 1
        try:
            resp = await self.client.call_api(
                path, "GET", query_params=query, auth_settings=["BearerToken"],
                header_params={"Accept": "application/json"}, _preload_content=False,
                _request_timeout=timeout_seconds + 30)
        except ApiException as e:
            raise ApiError.from_exception(e) from e
        ended = False
        try:
            async for line in resp.content:
                if not line.strip():
                    continue
                event = orjson.loads(line)
                kind, obj = str(event.get("type", "")), event.get("object") or {}
                if kind == "ERROR":
                    raise ApiError.from_status(int(obj.get("code", 500)), "", obj)
                yield kind, obj
            ended = True
        finally:
            if not ended:
                _drop(resp)
            resp.release()


def _drop(resp: aiohttp.ClientResponse) -> None:
    """Close an abandoned stream's connection at once. A graceful TLS close waits for the
    server's answer, which a stopping process does not wait for: its socket then outlives
    the event loop, unclosed."""
    connection = resp.connection
    transport = connection.transport if connection is not None else None
    if transport is not None:
        transport.abort()
