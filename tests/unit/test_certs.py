"""Certificates: validity windows, names, key usage, and the rotation plan step by step."""

from __future__ import annotations

import datetime
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from certs import certificate
from certs.authority import BACKDATE, issue_ca, issue_serving, service_names
from certs.manager import CertSettings, secret_for, state_from_secret
from certs.rotation import Lifetimes, Names, Phase, plan
from webhook.errors import CertificateMismatch
from webhook.tls import CertReloader, check_names

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
DAY = datetime.timedelta(days=1)
NAMES = Names(tuple(service_names("compactor-webhook", "compactor-system")))
LIFE = Lifetimes(ca=365 * DAY, serving=90 * DAY, overlap=datetime.timedelta(minutes=10))


@pytest.mark.parametrize("missing", ["ca.crt", "ca.key", "tls.crt", "tls.key", "ca-bundle.crt"])
def test_the_state_is_read_back_from_its_secret_and_none_from_no_or_part_of_one(
        missing: str) -> None:
    state = plan(plan(None, NAMES, LIFE, NOW), NAMES, LIFE, NOW, force_ca=True)
    settings = CertSettings("compactor-system", "tls", "compactor-webhook", NAMES, LIFE)
    secret = secret_for(state, settings, "7")
    assert state_from_secret(secret) == state
    assert state_from_secret(None) is None
    del secret["data"][missing]
    assert state_from_secret(secret) is None


def test_service_names_cover_every_form_the_api_server_may_use() -> None:
    assert service_names("svc", "ns") == ["svc", "svc.ns", "svc.ns.svc",
                                          "svc.ns.svc.cluster.local"]


def test_serving_certificate_names_usage_and_window() -> None:
    ca = issue_ca("ca", LIFE.ca, NOW)
    serving = issue_serving(ca, NAMES.dns, ["127.0.0.1"], LIFE.serving, NOW)
    cert = x509.load_pem_x509_certificate(serving.cert_pem)
    info = certificate.read(serving.cert_pem)
    assert set(info.dns_names) == set(NAMES.dns) and info.ips == ("127.0.0.1",)
    assert info.not_before == NOW - BACKDATE and info.not_after == NOW + LIFE.serving
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and not usage.key_cert_sign
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert certificate.signed_by(serving.cert_pem, ca.cert_pem)
    assert not certificate.signed_by(serving.cert_pem, issue_ca("other", LIFE.ca, NOW).cert_pem)


def test_ca_is_a_ca_and_serving_never_outlives_it() -> None:
    ca = issue_ca("ca", 30 * DAY, NOW)
    cert = x509.load_pem_x509_certificate(ca.cert_pem)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    serving = issue_serving(ca, ["x"], [], 90 * DAY, NOW)
    assert certificate.read(serving.cert_pem).not_after == NOW + 30 * DAY


def test_serving_is_reissued_at_two_thirds_of_its_life() -> None:
    state = plan(None, NAMES, LIFE, NOW)
    assert plan(state, NAMES, LIFE, NOW + 59 * DAY) == state
    later = plan(state, NAMES, LIFE, NOW + 61 * DAY)
    assert later.serving != state.serving and later.ca == state.ca
    assert later.phase is Phase.STEADY


def test_a_shortened_serving_lifetime_reissues_at_once_and_only_once() -> None:
    state = plan(None, NAMES, LIFE, NOW)
    short = Lifetimes(ca=LIFE.ca, serving=datetime.timedelta(minutes=30), overlap=LIFE.overlap)
    later = plan(state, NAMES, short, NOW + DAY)
    assert later.serving != state.serving and later.ca == state.ca
    info = certificate.read(later.serving.cert_pem)
    assert info.not_after == NOW + DAY + short.serving
    # The same lifetime, even seen by a replica whose clock is minutes off, keeps it.
    assert plan(later, NAMES, short, NOW + DAY - datetime.timedelta(minutes=5)) == later
    assert plan(later, NAMES, short, NOW + DAY + datetime.timedelta(minutes=15)) == later
    # Lengthened again: kept until two thirds of the shorter life.
    assert plan(later, NAMES, LIFE, NOW + DAY + datetime.timedelta(minutes=1)) == later


def test_serving_is_reissued_when_the_names_change() -> None:
    state = plan(None, NAMES, LIFE, NOW)
    wider = Names(NAMES.dns, ("10.0.0.5",))
    again = plan(state, wider, LIFE, NOW + DAY)
    assert certificate.missing_names(again.serving.cert_pem, wider.all) == []


def test_ca_rotation_keeps_both_cas_trusted_until_the_serving_cert_moved() -> None:
    state = plan(None, NAMES, LIFE, NOW)
    t1 = NOW + 245 * DAY  # past two thirds of the CA's year
    step1 = plan(state, NAMES, LIFE, t1)
    assert step1.phase is Phase.PENDING_SERVING and step1.serving == state.serving
    assert certificate.split_bundle(step1.bundle) == [state.ca.cert_pem, step1.ca.cert_pem]
    assert plan(step1, NAMES, LIFE, t1 + datetime.timedelta(minutes=5)) == step1
    t2 = t1 + datetime.timedelta(minutes=11)
    step2 = plan(step1, NAMES, LIFE, t2)
    assert step2.phase is Phase.PENDING_RETIRE
    assert certificate.signed_by(step2.serving.cert_pem, step1.ca.cert_pem)
    assert len(certificate.split_bundle(step2.bundle)) == 2
    step3 = plan(step2, NAMES, LIFE, t2 + datetime.timedelta(minutes=11))
    assert step3.phase is Phase.STEADY
    assert certificate.split_bundle(step3.bundle) == [step1.ca.cert_pem]


def test_ca_that_would_expire_before_a_new_serving_cert_is_rotated_early() -> None:
    short = Lifetimes(ca=100 * DAY, serving=90 * DAY, overlap=LIFE.overlap)
    state = plan(None, NAMES, short, NOW)
    assert plan(state, NAMES, short, NOW + 11 * DAY).phase is Phase.PENDING_SERVING


def test_expired_ca_starts_over() -> None:
    state = plan(None, NAMES, LIFE, NOW)
    assert plan(state, NAMES, LIFE, NOW + 400 * DAY).ca != state.ca


def _write(tmp: Path, names: list[str]) -> tuple[str, str]:
    ca = issue_ca("ca", LIFE.ca, datetime.datetime.now(datetime.UTC))
    s = issue_serving(ca, names, ["127.0.0.1"], LIFE.serving, datetime.datetime.now(datetime.UTC))
    (tmp / "tls.crt").write_bytes(s.cert_pem)
    (tmp / "tls.key").write_bytes(s.key_pem)
    return str(tmp / "tls.crt"), str(tmp / "tls.key")


def test_check_names_refuses_a_certificate_for_other_names(tmp_path: Path) -> None:
    cert, _ = _write(tmp_path, ["elsewhere"])
    with pytest.raises(CertificateMismatch, match="compactor-webhook.compactor-system.svc"):
        check_names(cert, "compactor-webhook", "compactor-system")
    check_names(cert, None, None)  # loopback test setups name no Service


def test_reloader_swaps_the_certificate_and_keeps_the_old_one_on_bad_input(
        tmp_path: Path) -> None:
    cert, key = _write(tmp_path, service_names("compactor-webhook", "compactor-system"))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    reloader = CertReloader(ctx, cert, key, "compactor-webhook", "compactor-system")
    assert reloader.check() is False  # unchanged
    _write(tmp_path, service_names("compactor-webhook", "compactor-system"))
    assert reloader.check() is True and reloader.reloads == 1
    _write(tmp_path, ["wrong-name"])
    assert reloader.check() is False and reloader.reloads == 1
