"""Wires settings, the API reader, the owner cache and the app together; runs uvicorn with TLS."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from typing import Any

import uvicorn

from webhook.admission import Admitter
from webhook.app import MutateFirst, create_app
from webhook.connection import guarded_protocol, loop_factory
from webhook.errors import CertificateMismatch, LookupFailed
from webhook.feed import OwnerFeed
from webhook.kubeapi import KubeReader
from webhook.metrics import Metrics
from webhook.owners import OwnerCache
from webhook.settings import Settings
from webhook.tls import CertReloader, check_names, harden, read_one_record_at_a_time


class Webhook:
    def __init__(self, settings: Settings, reader: Any = None) -> None:
        self.settings = settings
        self.metrics = Metrics()
        self.reader: Any = reader
        self.reloader: CertReloader | None = None
        self._reload_task: asyncio.Task[None] | None = None
        self.feed: OwnerFeed | None = None
        self._feed_task: asyncio.Task[None] | None = None
        self.cache = OwnerCache(self._fetch, self.metrics, maxsize=settings.cache_size,
                                ttl=settings.cache_ttl_seconds,
                                negative_ttl=settings.negative_ttl_seconds)
        self.app: MutateFirst = create_app(
            Admitter(self.cache, self.metrics, budget_seconds=settings.budget_seconds,
                     limit_ranges=self._limit_ranges,
                     exempt_schedulers=settings.exempt_schedulers,
                     protected=settings.protected_namespaces),
            self.metrics, max_body_bytes=settings.max_body_bytes,
            ready=lambda: self.reader is not None,
            on_startup=self._start, on_shutdown=self._stop)

    def _limit_ranges(self, namespace: str) -> str | None:
        return self.feed.limit_ranges(namespace) if self.feed is not None else None

    async def _fetch(self, path: str) -> dict[str, Any] | None:
        if self.reader is None:
            raise LookupFailed("API client not started")
        result: dict[str, Any] | None = await self.reader.get(path)
        return result

    async def _start(self) -> None:
        if self.reader is None:
            self.reader = await KubeReader.from_environment(
                self.settings.kubeconfig, self.settings.lookup_timeout_seconds)
        if self.settings.watch_owners:
            self.feed = OwnerFeed(self.reader, self.metrics)
            self.cache.known = self.feed.get
            self._feed_task = asyncio.create_task(self.feed.run())
        if self.reloader is not None:
            self._reload_task = asyncio.create_task(
                self.reloader.run(self.settings.cert_reload_seconds))

    async def _stop(self) -> None:
        for task in (self._reload_task, self._feed_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.reader is not None:
            await self.reader.close()


def uvicorn_config(webhook: Webhook) -> uvicorn.Config:
    """uvicorn with every limit set on purpose (see Settings and webhook/connection.py)."""
    s = webhook.settings
    return uvicorn.Config(
        webhook.app, host=s.host, port=s.port, ssl_certfile=s.cert_file, ssl_keyfile=s.key_file,
        workers=1, access_log=False, log_level=s.log_level, lifespan="on",
        timeout_graceful_shutdown=10,
        http=guarded_protocol(s.read_timeout_seconds, s.write_timeout_seconds),
        limit_concurrency=s.max_connections, timeout_keep_alive=s.keep_alive_seconds,
        h11_max_incomplete_event_size=s.max_header_bytes,
        # The API server calls directly: no proxy's X-Forwarded-* to trust, and no Server or
        # Date header it reads (each is one more header h11 validates on every answer).
        proxy_headers=False, server_header=False, date_header=False,
    )


def serve(config: uvicorn.Config, tls_handshake_timeout: float) -> None:
    """``uvicorn.Server.run`` on an event loop that bounds TLS handshakes."""
    with asyncio.Runner(loop_factory=loop_factory(tls_handshake_timeout)) as runner:
        runner.run(uvicorn.Server(config).serve())


def main() -> None:
    settings = Settings.from_env()
    logging.basicConfig(level=settings.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        check_names(settings.cert_file, settings.service_name, settings.service_namespace)
    except (CertificateMismatch, OSError) as e:
        logging.getLogger("compactor.webhook").error("refusing to start: %s", e)
        sys.exit(2)
    read_one_record_at_a_time()
    webhook = Webhook(settings)
    config = uvicorn_config(webhook)
    config.load()  # builds the SSLContext that the reloader refreshes in place
    assert config.ssl is not None
    harden(config.ssl)
    webhook.reloader = CertReloader(config.ssl, settings.cert_file, settings.key_file,
                                    settings.service_name, settings.service_namespace,
                                    on_load=webhook.metrics.certificate_expiry.set)
    serve(config, settings.tls_handshake_timeout_seconds)
