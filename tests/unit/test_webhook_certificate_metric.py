"""The expiry of the certificate the webhook serves, as a metric: set at start, moved by each
reload, left alone when a bad pair is refused (the alert on it must see what is served)."""

from __future__ import annotations

import datetime
import ssl
from pathlib import Path

from prometheus_client import generate_latest

from certs.authority import issue_ca, issue_serving, service_names
from webhook.metrics import Metrics
from webhook.tls import CertReloader

NOW = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
NAMES = service_names("compactor-webhook", "compactor-system")


def _write(tmp: Path, names: list[str], days: int) -> tuple[str, str, float]:
    ca = issue_ca("ca", datetime.timedelta(days=365), NOW)
    s = issue_serving(ca, names, ["127.0.0.1"], datetime.timedelta(days=days), NOW)
    (tmp / "tls.crt").write_bytes(s.cert_pem)
    (tmp / "tls.key").write_bytes(s.key_pem)
    expires = (NOW + datetime.timedelta(days=days)).timestamp()
    return str(tmp / "tls.crt"), str(tmp / "tls.key"), expires


def _exported(metrics: Metrics) -> float:
    name = "compactor_webhook_certificate_expiration_timestamp_seconds"
    for line in generate_latest(metrics.registry).decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not exported")


def test_the_expiry_follows_the_served_pair(tmp_path: Path) -> None:
    metrics = Metrics()
    cert, key, first = _write(tmp_path, NAMES, days=90)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    CertReloader(ctx, cert, key, "compactor-webhook", "compactor-system",
                 on_load=metrics.certificate_expiry.set)
    # Issuing backdates notBefore, never notAfter: the expiry is exactly now + lifetime.
    assert abs(_exported(metrics) - first) < 2


def test_a_reload_moves_it_and_a_refused_pair_does_not(tmp_path: Path) -> None:
    metrics = Metrics()
    cert, key, first = _write(tmp_path, NAMES, days=90)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    reloader = CertReloader(ctx, cert, key, "compactor-webhook", "compactor-system",
                            on_load=metrics.certificate_expiry.set)
    _, _, renewed = _write(tmp_path, NAMES, days=10)
    assert reloader.check() is True
    assert abs(_exported(metrics) - renewed) < 2 and renewed < first
    _write(tmp_path, ["wrong-name"], days=400)
    assert reloader.check() is False
    assert abs(_exported(metrics) - renewed) < 2
    (tmp_path / "tls.crt").write_text("not a certificate")
    assert reloader.check() is False
    assert abs(_exported(metrics) - renewed) < 2
