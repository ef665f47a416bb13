"""A small synchronous Kubernetes REST client (httpx + client certificate) for tests and the demo.

Tests want to say exactly which request reaches the API server and read exactly what it
answers (status codes included), so this stays a thin layer over HTTP rather than a model.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import orjson

from compaction import kinds
from compaction.kinds import Kind

T = TypeVar("T")
Obj = dict[str, Any]


class ApiError(Exception):
    """A non-2xx answer; ``status`` is the HTTP code, ``body`` the decoded Status object."""

    def __init__(self, status: int, body: Obj, method: str, path: str) -> None:
        self.status, self.body = status, body
        self.reason = str(body.get("reason", ""))
        self.message = str(body.get("message", ""))
        super().__init__(f"{method} {path}: HTTP {status} {self.reason}: {self.message[:500]}")


def path(resource: str, namespace: str | None = None, name: str | None = None,
         api: str | None = None, sub: str | None = None) -> str:
    """The REST path of a resource by its plural, from the one kinds table of ``compaction``;
    ``api`` (e.g. ``apis/example.com/v1``) for a kind that table does not hold."""
    if api is None:
        return kinds.by_plural(resource).path(namespace, name, sub)
    return Kind("", *_group_version(api), resource).path(namespace, name, sub)


def _group_version(api: str) -> tuple[str, str]:
    parts = api.strip("/").split("/")
    return ("", parts[-1]) if parts[0] == "api" else (parts[1], parts[2])


@dataclass(frozen=True)
class Credentials:
    server: str
    ca: Path
    cert: Path
    key: Path


class Kube:
    def __init__(self, creds: Credentials, timeout: float = 30.0) -> None:
        self.creds = creds
        tls = ssl.create_default_context(cafile=str(creds.ca))
        tls.load_cert_chain(str(creds.cert), str(creds.key))
        self._http = httpx.Client(base_url=creds.server, verify=tls, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def request(self, method: str, url: str, body: Any = None,
                content_type: str = "application/json", params: dict[str, str] | None = None,
                headers: dict[str, str] | None = None) -> Obj:
        hdrs = {"Content-Type": content_type, **(headers or {})}
        resp = self._http.request(method, url, json=body, headers=hdrs, params=params)
        data: Obj
        try:
            data = resp.json() if resp.content else {}
        except ValueError:
            data = {"message": resp.text}
        if resp.status_code >= 300:
            raise ApiError(resp.status_code, data, method, url)
        return data

    def raw(self, url: str) -> httpx.Response:
        return self._http.get(url)

    def get(self, url: str) -> Obj:
        return self.request("GET", url)

    def create(self, url: str, obj: Obj, dry_run: bool = False) -> Obj:
        return self.request("POST", url, obj, params={"dryRun": "All"} if dry_run else None)

    def apply(self, url: str, obj: Obj, manager: str = "compactor-tests") -> Obj:
        """Server-side apply of one object at its own URL."""
        return self.request(
            "PATCH", url, obj, "application/apply-patch+yaml",
            params={"fieldManager": manager, "force": "true"},
        )

    def patch(self, url: str, patch: Any, kind: str = "merge") -> Obj:
        ctype = {
            "merge": "application/merge-patch+json",
            "json": "application/json-patch+json",
            "strategic": "application/strategic-merge-patch+json",
        }[kind]
        return self.request("PATCH", url, patch, ctype)

    def delete(self, url: str, missing_ok: bool = True) -> Obj:
        try:
            return self.request("DELETE", url)
        except ApiError as e:
            if e.status == 404 and missing_ok:
                return {}
            raise

    def find(self, url: str) -> Obj | None:
        """The object, or None where there is none (404); any other answer raises."""
        try:
            return self.get(url)
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def items(self, url: str, label_selector: str | None = None) -> list[Obj]:
        params = {"labelSelector": label_selector} if label_selector else None
        return list(self.request("GET", url, params=params).get("items", []))

    def watch(self, url: str, resource_version: str, timeout: float = 60.0
              ) -> Iterator[tuple[str, Obj]]:
        """(type, object) of each watch event from ``resource_version`` on, until the server
        ends the watch after about ``timeout`` seconds; an ERROR event (a 410 among them) is
        raised as ApiError."""
        params = {"watch": "1", "resourceVersion": resource_version,
                  "allowWatchBookmarks": "true", "timeoutSeconds": str(int(timeout))}
        with self._http.stream("GET", url, params=params,
                               timeout=httpx.Timeout(10.0, read=timeout + 10)) as resp:
            if resp.status_code >= 300:
                resp.read()
                raise ApiError(resp.status_code, resp.json() if resp.content else {}, "GET",
                               url)
            for line in resp.iter_lines():
                if not line:
                    continue
                event = orjson.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise ApiError(int(status.get("code", 500)), status, "WATCH", url)
                yield str(event.get("type")), event.get("object") or {}

    def evict(self, namespace: str, name: str) -> Obj:
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace}}
        return self.create(path("pods", namespace, name, sub="eviction"), body)

    def ensure_namespace(self, name: str, labels: dict[str, str] | None = None,
                         default_service_account: bool = False) -> None:
        """Create the namespace if missing; with its ``default`` ServiceAccount on request,
        since Pods cannot be created without it (the controller manager races us to it)."""
        objects = [(path("namespaces"), {"metadata": {"name": name, "labels": labels or {}}})]
        if default_service_account:
            objects.append((path("serviceaccounts", name), {"metadata": {"name": "default"}}))
        for url, obj in objects:
            try:
                self.create(url, obj)
            except ApiError as e:
                if e.status != 409:
                    raise


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 60.0,
             interval: float = 0.2) -> T:
    """Poll ``probe`` until it returns something truthy; fail with ``what`` and the last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = probe()
        except ApiError as e:
            last = e
        else:
            if last:
                return last  # type: ignore[no-any-return]
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")
        time.sleep(interval)

