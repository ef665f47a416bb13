"""When to issue, rotate and retire certificates. Pure: state and time in, new state out.

Serving certificates are re-issued at two thirds of their lifetime, or at once when they were
issued for longer than the lifetime now configured (a shortened lifetime takes effect). A CA
is replaced at two thirds of its lifetime too, or sooner if it would expire before a serving
certificate issued now; that happens in three steps, each at least ``overlap`` apart, so the
API server always trusts the certificate the webhook serves:

1. a new CA joins the bundle next to the old one (the serving certificate is unchanged);
2. the serving certificate is re-issued by the new CA;
3. the old CA leaves the bundle.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from certs import certificate
from certs.authority import BACKDATE, Issued, issue_ca, issue_serving

ROTATE_AT = 2 / 3
# Certificate times have whole seconds; a window this much longer than the lifetime is not ours.
LIFETIME_SLACK = datetime.timedelta(minutes=1)


class Phase(StrEnum):
    STEADY = ""
    PENDING_SERVING = "pending-serving"
    PENDING_RETIRE = "pending-retire"


@dataclass(frozen=True)
class Lifetimes:
    ca: datetime.timedelta = datetime.timedelta(days=730)
    serving: datetime.timedelta = datetime.timedelta(days=90)
    overlap: datetime.timedelta = datetime.timedelta(minutes=10)


@dataclass(frozen=True)
class TLSState:
    ca: Issued
    serving: Issued
    bundle: bytes
    phase: Phase = Phase.STEADY
    phase_since: datetime.datetime | None = None


@dataclass(frozen=True)
class Names:
    dns: tuple[str, ...]
    ips: tuple[str, ...] = ()

    @property
    def all(self) -> tuple[str, ...]:
        return self.dns + self.ips


def _bundle(pems: Sequence[bytes], now: datetime.datetime) -> bytes:
    seen: list[bytes] = []
    for pem in pems:
        if pem not in seen and certificate.read(pem).valid_at(now):
            seen.append(pem)
    return b"".join(seen)


def _serve(ca: Issued, names: Names, life: Lifetimes, now: datetime.datetime) -> Issued:
    return issue_serving(ca, names.dns, names.ips, life.serving, now)


def fresh(names: Names, life: Lifetimes, now: datetime.datetime) -> TLSState:
    ca = issue_ca("compactor-webhook-ca", life.ca, now)
    return TLSState(ca, _serve(ca, names, life, now), ca.cert_pem)


def _ca_due(ca: Issued, life: Lifetimes, now: datetime.datetime) -> bool:
    info = certificate.read(ca.cert_pem)
    return info.fraction_elapsed(now) >= ROTATE_AT or info.not_after - now < life.serving


def _outlives(info: certificate.CertInfo, lifetime: datetime.timedelta) -> bool:
    """Issued for longer than ``lifetime`` (which an operator shortened since): judged on the
    certificate's own window, so replicas whose clocks differ agree."""
    return info.not_after - info.not_before > lifetime + BACKDATE + LIFETIME_SLACK


def _serving_due(state: TLSState, names: Names, life: Lifetimes,
                 now: datetime.datetime) -> bool:
    info = certificate.read(state.serving.cert_pem)
    return (info.fraction_elapsed(now) >= ROTATE_AT or not info.valid_at(now)
            or _outlives(info, life.serving)
            or bool(certificate.missing_names(state.serving.cert_pem, names.all))
            or not certificate.signed_by(state.serving.cert_pem, state.ca.cert_pem))


def plan(state: TLSState | None, names: Names, life: Lifetimes, now: datetime.datetime,
         force_serving: bool = False, force_ca: bool = False) -> TLSState:
    if state is None or not certificate.read(state.ca.cert_pem).valid_at(now):
        return fresh(names, life, now)
    since = state.phase_since or now
    bundle = certificate.split_bundle(state.bundle)
    if state.phase is Phase.PENDING_SERVING:
        if now - since < life.overlap:
            return state
        return replace(state, serving=_serve(state.ca, names, life, now),
                       phase=Phase.PENDING_RETIRE, phase_since=now)
    if state.phase is Phase.PENDING_RETIRE:
        if now - since < life.overlap:
            return state
        return replace(state, bundle=_bundle([state.ca.cert_pem], now), phase=Phase.STEADY,
                       phase_since=None)
    if force_ca or _ca_due(state.ca, life, now):
        new_ca = issue_ca("compactor-webhook-ca", life.ca, now)
        return replace(state, ca=new_ca, bundle=_bundle([*bundle, new_ca.cert_pem], now),
                       phase=Phase.PENDING_SERVING, phase_since=now)
    if force_serving or _serving_due(state, names, life, now):
        return replace(state, serving=_serve(state.ca, names, life, now),
                       bundle=_bundle([*bundle, state.ca.cert_pem], now))
    return state
