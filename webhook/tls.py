"""The serving certificate: checked against the Service names, reloaded without a restart.

Mounted Secrets change by an atomic symlink swap and send no useful file events, so the
files are hashed on a short interval; a changed pair is loaded into the live SSLContext,
which new handshakes use while connections already open carry on undisturbed.

Each TLS connection gets a read buffer of asyncio's own; the API server opens hundreds at
once when ReplicaSets scale out, so its size is what the webhook's memory peak is made of.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import hashlib
import logging
import ssl
from collections.abc import Callable
from pathlib import Path

from certs.authority import service_names
from certs.certificate import missing_names, read
from webhook.errors import CertificateMismatch

log = logging.getLogger("compactor.webhook")
# A TLS record carries at most 16 KiB of plaintext (RFC 8446, 5.1). asyncio reads up to
# 256 KiB at a time into a buffer it allocates per connection: 500 connections from the API
# server cost 160 MiB of buffers, against 40 MiB with reads of one record.
TLS_READ_BYTES = 16 * 1024


def read_one_record_at_a_time() -> None:
    """Per-connection TLS read buffers of one record, for every server started after this."""
    asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BYTES


# TLS 1.2 suites with forward secrecy and an AEAD cipher; TLS 1.3's suites are all of that.
MODERN_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"


def harden(context: ssl.SSLContext) -> None:
    """TLS 1.2 and later only, modern suites, no compression or renegotiation: what the API
    server speaks, and nothing an old or downgraded client could."""
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(MODERN_CIPHERS)
    context.options |= (ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
                        | ssl.OP_CIPHER_SERVER_PREFERENCE)


def check_names(cert_file: str, service: str | None, namespace: str | None) -> None:
    """Refuse a certificate the API server would reject for this Service."""
    if not service or not namespace:
        return
    missing = missing_names(Path(cert_file).read_bytes(), service_names(service, namespace))
    if missing:
        raise CertificateMismatch(
            f"certificate {cert_file} does not cover the webhook Service names "
            f"{', '.join(missing)}; the API server would reject it. Issue it for "
            f"{service}.{namespace}.svc (or let the controller manage it).")


def expires_at(cert_file: str) -> float:
    """notAfter of the (first, leaf) certificate in the file, as a Unix timestamp."""
    return read(Path(cert_file).read_bytes()).not_after.timestamp()


def _digest(*files: str) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(Path(f).read_bytes())
    return h.hexdigest()


class CertReloader:
    """``on_load`` hears the expiry of each pair put into service, the first one included."""

    def __init__(self, context: ssl.SSLContext, cert_file: str, key_file: str,
                 service: str | None, namespace: str | None,
                 on_load: Callable[[float], None] | None = None) -> None:
        self.context, self.cert_file, self.key_file = context, cert_file, key_file
        self.service, self.namespace = service, namespace
        self.on_load = on_load
        self.loaded = _digest(cert_file, key_file)
        self.reloads = 0
        if on_load is not None:
            on_load(expires_at(cert_file))

    def check(self) -> bool:
        """Load the files again if they changed; True when a new pair is now served."""
        try:
            current = _digest(self.cert_file, self.key_file)
        except OSError as e:
            log.warning("cannot read the certificate files: %s", e)
            return False
        if current == self.loaded:
            return False
        try:
            check_names(self.cert_file, self.service, self.namespace)
            expiry = expires_at(self.cert_file)
            self.context.load_cert_chain(self.cert_file, self.key_file)
        except (CertificateMismatch, ssl.SSLError, OSError, ValueError) as e:
            # Half-written pair or wrong names: keep serving the previous certificate.
            log.error("not reloading the certificate: %s", e)
            return False
        self.loaded = current
        self.reloads += 1
        if self.on_load is not None:
            self.on_load(expiry)
        log.info("reloaded the serving certificate (%d so far)", self.reloads)
        return True

    async def run(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self.check()
