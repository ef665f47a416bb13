"""Webhook settings, read once from the environment (``COMPACTOR_WEBHOOK_*``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from compaction import names
from compaction.intent import parse_exempt_schedulers


@dataclass(frozen=True)
class Settings:
    host: str = "0.0.0.0"
    port: int = 8443
    cert_file: str = "/etc/compactor/tls/tls.crt"
    key_file: str = "/etc/compactor/tls/tls.key"
    # Whole-request budget; must stay below the webhook configuration's timeoutSeconds.
    budget_seconds: float = 2.0
    lookup_timeout_seconds: float = 1.5
    cache_size: int = 100_000
    cache_ttl_seconds: float = 30.0
    negative_ttl_seconds: float = 5.0
    max_body_bytes: int = 3 * 1024 * 1024
    kubeconfig: str | None = None
    log_level: str = "info"
    # The Service the API server calls; when set, the certificate must cover its names.
    service_name: str | None = None
    service_namespace: str | None = None
    cert_reload_seconds: float = 5.0
    # Metadata-only watches of the owner kinds: no API call per admission once warm.
    watch_owners: bool = True
    # Connections (webhook/connection.py). At most this many open connections or requests
    # in flight; past it, HTTP 503 at once (the API server then fails open) rather than
    # memory past the container's limit (about 0.3 MiB per connection in a burst).
    max_connections: int = 256
    # Idle keep-alive: longer than the API server's own 90 s, so that it is always the one
    # that closes an idle connection (a server closing first races the client's next request).
    keep_alive_seconds: int = 120
    max_header_bytes: int = 16 * 1024
    tls_handshake_timeout_seconds: float = 5.0
    # A request must arrive whole this soon after its first byte; an answer the client does
    # not read must drain this soon. The API server does both at once.
    read_timeout_seconds: float = 5.0
    write_timeout_seconds: float = 5.0
    # Schedulers a Pod keeps when it already names one (the controller has the same
    # setting: the two must agree, or the runtime hook replaces what admission keeps).
    exempt_schedulers: frozenset[str] = names.EXEMPT_SCHEDULERS

    @property
    def protected_namespaces(self) -> frozenset[str]:
        """kube-system and the namespace the webhook runs in (its Service's, from the
        downward API): their Pods are never mutated, whatever the webhook configuration's
        namespaceSelector lets through."""
        return names.protected_namespaces(self.service_namespace or names.INSTALL_NAMESPACE)

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Settings:
        p = "COMPACTOR_WEBHOOK_"
        d = cls()

        def num(name: str, default: float) -> float:
            raw = env.get(p + name)
            if raw is None:
                return default
            try:
                value = float(raw)
            except ValueError:
                raise ValueError(f"{p}{name} must be a number, not {raw!r}") from None
            if value <= 0:
                raise ValueError(f"{p}{name} must be positive, not {raw!r}")
            return value

        def flag(name: str, default: bool) -> bool:
            raw = env.get(p + name)
            if raw is None:
                return default
            if raw.lower() not in ("true", "false"):
                raise ValueError(f"{p}{name} must be true or false, not {raw!r}")
            return raw.lower() == "true"

        return cls(
            host=env.get(p + "HOST", d.host),
            port=int(num("PORT", d.port)),
            cert_file=env.get(p + "CERT_FILE", d.cert_file),
            key_file=env.get(p + "KEY_FILE", d.key_file),
            budget_seconds=num("BUDGET_SECONDS", d.budget_seconds),
            lookup_timeout_seconds=num("LOOKUP_TIMEOUT_SECONDS", d.lookup_timeout_seconds),
            cache_size=int(num("CACHE_SIZE", d.cache_size)),
            cache_ttl_seconds=num("CACHE_TTL_SECONDS", d.cache_ttl_seconds),
            negative_ttl_seconds=num("NEGATIVE_TTL_SECONDS", d.negative_ttl_seconds),
            kubeconfig=env.get(p + "KUBECONFIG") or env.get("KUBECONFIG") or None,
            log_level=env.get(p + "LOG_LEVEL", d.log_level),
            service_name=env.get(p + "SERVICE_NAME") or None,
            service_namespace=env.get(p + "SERVICE_NAMESPACE") or None,
            cert_reload_seconds=num("CERT_RELOAD_SECONDS", d.cert_reload_seconds),
            watch_owners=flag("WATCH_OWNERS", d.watch_owners),
            max_connections=int(num("MAX_CONNECTIONS", d.max_connections)),
            keep_alive_seconds=int(num("KEEP_ALIVE_SECONDS", d.keep_alive_seconds)),
            max_header_bytes=int(num("MAX_HEADER_BYTES", d.max_header_bytes)),
            tls_handshake_timeout_seconds=num("TLS_HANDSHAKE_TIMEOUT_SECONDS",
                                              d.tls_handshake_timeout_seconds),
            read_timeout_seconds=num("READ_TIMEOUT_SECONDS", d.read_timeout_seconds),
            write_timeout_seconds=num("WRITE_TIMEOUT_SECONDS", d.write_timeout_seconds),
            exempt_schedulers=(parse_exempt_schedulers(env[p + "EXEMPT_SCHEDULERS"])
                               if p + "EXEMPT_SCHEDULERS" in env else d.exempt_schedulers),
        )
