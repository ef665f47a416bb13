"""The webhook's only API-server I/O: GET one object by path with its own credentials."""

from __future__ import annotations

import ssl
from typing import Any

import aiohttp
import orjson
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import Configuration

from webhook.owners import LookupFailed


class KubeReader:
    def __init__(self, configuration: Any, timeout: float = 1.5) -> None:
        self._cfg = configuration
        tls = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
        if configuration.cert_file:
            tls.load_cert_chain(configuration.cert_file, configuration.key_file)
        self._session = aiohttp.ClientSession(
            base_url=configuration.host.rstrip("/") + "/",
            connector=aiohttp.TCPConnector(ssl=tls, limit=64),
            timeout=aiohttp.ClientTimeout(total=timeout),
        )
        self.requests = 0

    @classmethod
    async def from_environment(cls, kubeconfig: str | None, timeout: float) -> KubeReader:
        """In-cluster service-account credentials, or the given kubeconfig file."""
        cfg = Configuration()
        if kubeconfig:
            await kube_config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
        else:
            kube_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        return cls(cfg, timeout)

    async def get(self, path: str) -> dict[str, Any] | None:
        """The object, None when it does not exist; LookupFailed for anything else."""
        self.requests += 1
        headers = {"Accept": "application/json"}
        token = await self._cfg.get_api_key_with_prefix("BearerToken")
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
