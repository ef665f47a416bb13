"""Facts read off a PEM certificate: validity window, names, who signed it."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding


@dataclass(frozen=True)
class CertInfo:
    not_before: datetime.datetime
    not_after: datetime.datetime
    dns_names: tuple[str, ...]
    ips: tuple[str, ...]
    subject: str
    issuer: str
    fingerprint: str

    def fraction_elapsed(self, now: datetime.datetime) -> float:
        total = (self.not_after - self.not_before).total_seconds()
        return (now - self.not_before).total_seconds() / total if total > 0 else 1.0

    def valid_at(self, now: datetime.datetime) -> bool:
        return self.not_before <= now < self.not_after


def read(pem: bytes) -> CertInfo:
    cert = x509.load_pem_x509_certificate(pem)
    dns: tuple[str, ...] = ()
    ips: tuple[str, ...] = ()
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = tuple(san.get_values_for_type(x509.DNSName))
        ips = tuple(str(ip) for ip in san.get_values_for_type(x509.IPAddress))
    except x509.ExtensionNotFound:
        pass
    return CertInfo(cert.not_valid_before_utc, cert.not_valid_after_utc, dns, ips,
                    cert.subject.rfc4514_string(), cert.issuer.rfc4514_string(),
                    cert.fingerprint(hashes.SHA256()).hex())


def split_bundle(pem: bytes) -> list[bytes]:
    if not pem.strip():
        return []
    return [c.public_bytes(Encoding.PEM) for c in x509.load_pem_x509_certificates(pem)]


def signed_by(cert_pem: bytes, ca_pem: bytes) -> bool:
    cert = x509.load_pem_x509_certificate(cert_pem)
    ca = x509.load_pem_x509_certificate(ca_pem)
    key = ca.public_key()
    if cert.issuer != ca.subject or not isinstance(key, ec.EllipticCurvePublicKey):
        return False
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def missing_names(cert_pem: bytes, required: Sequence[str]) -> list[str]:
    info = read(cert_pem)
    have = set(info.dns_names) | set(info.ips)
    return [n for n in required if n not in have]

