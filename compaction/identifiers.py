"""Object names and apiVersions, judged by the API server's own rules.

A Pod's author writes its ``ownerReferences``; the API server validates them only after
mutating admission. Anything the webhook turns into a request must pass these checks first.
"""

from __future__ import annotations

import re
from typing import Final

_LABEL: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL: Final = re.compile(rf"{_LABEL}\Z")
_DNS_SUBDOMAIN: Final = re.compile(rf"{_LABEL}(\.{_LABEL})*\Z")


def is_dns_label(value: str) -> bool:
    """RFC 1123 label: namespaces, API versions (at most 63 characters)."""
    return len(value) <= 63 and _DNS_LABEL.match(value) is not None


def is_dns_subdomain(value: str) -> bool:
    """RFC 1123 subdomain: names of most objects and API groups (at most 253 characters)."""
    return len(value) <= 253 and _DNS_SUBDOMAIN.match(value) is not None


def parse_api_version(value: str) -> tuple[str, str] | None:
    """``(group, version)`` of ``v1`` or ``<group>/<version>``; None for anything else."""
    group, sep, version = value.rpartition("/")
    if not sep:
        return ("", value) if is_dns_label(value) else None
    if not is_dns_subdomain(group) or not is_dns_label(version):
        return None
    return group, version
