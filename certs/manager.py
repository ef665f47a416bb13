"""Keep the webhook's TLS Secret and the caBundle of its MutatingWebhookConfiguration current.

Run by the controller on every tick: a bundle reset by a person or a GitOps tool is put back
within seconds. With cert-manager (the configuration carries ``cert-manager.io/inject-ca-from``)
Compactor manages no certificate at all.
"""

from __future__ import annotations

import base64
import datetime
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from certs.authority import Issued
from certs.rotation import Lifetimes, Names, Phase, TLSState, plan
from compaction import kinds

log = logging.getLogger("compactor.certs")
CERT_MANAGER_ANNOTATION = "cert-manager.io/inject-ca-from"
PHASE_ANNOTATION = "compactor.dev/ca-rotation"
SINCE_ANNOTATION = "compactor.dev/ca-rotation-since"


class _Api(Protocol):
    async def get_or_none(self, path: str) -> dict[str, Any] | None: ...
    async def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]: ...
    async def patch(self, path: str, patch: Any, kind: str = ...) -> dict[str, Any]: ...
    async def request(self, method: str, path: str, body: Any = ...,
                      content_type: str = ..., query: dict[str, str] | None = ...
                      ) -> dict[str, Any]: ...


@dataclass(frozen=True)
class CertSettings:
    namespace: str
    secret: str
    webhook_configuration: str
    names: Names
    lifetimes: Lifetimes = Lifetimes()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(data: dict[str, str], key: str) -> bytes:
    return base64.b64decode(data.get(key, ""))


def state_from_secret(secret: dict[str, Any] | None) -> TLSState | None:
    if not secret:
        return None
    data = secret.get("data") or {}
    needed = ("ca.crt", "ca.key", "tls.crt", "tls.key", "ca-bundle.crt")
    if any(not data.get(k) for k in needed):
        return None
    ann = (secret.get("metadata") or {}).get("annotations") or {}
    since = ann.get(SINCE_ANNOTATION)
    return TLSState(
        ca=Issued(_unb64(data, "ca.crt"), _unb64(data, "ca.key")),
        serving=Issued(_unb64(data, "tls.crt"), _unb64(data, "tls.key")),
        bundle=_unb64(data, "ca-bundle.crt"),
        phase=Phase(ann.get(PHASE_ANNOTATION, "")),
        phase_since=datetime.datetime.fromisoformat(since) if since else None,
    )


def secret_for(state: TLSState, settings: CertSettings,
               resource_version: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": settings.secret, "namespace": settings.namespace,
        "labels": {"app.kubernetes.io/managed-by": "compactor",
                   "app.kubernetes.io/component": "webhook"},
        "annotations": {PHASE_ANNOTATION: state.phase.value,
                        SINCE_ANNOTATION: state.phase_since.isoformat()
                        if state.phase_since else ""},
    }
    if resource_version:
        meta["resourceVersion"] = resource_version
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls", "metadata": meta,
            "data": {"ca.crt": _b64(state.ca.cert_pem), "ca.key": _b64(state.ca.key_pem),
                     "tls.crt": _b64(state.serving.cert_pem),
                     "tls.key": _b64(state.serving.key_pem),
                     "ca-bundle.crt": _b64(state.bundle)}}


class CertManager:
    def __init__(self, api: _Api, settings: CertSettings,
                 clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(
                     datetime.UTC)) -> None:
        self.api, self.settings, self.clock = api, settings, clock
        s = settings
        self._secret_path = kinds.kind("Secret").path(s.namespace, s.secret)
        self._mwc_path = kinds.kind("MutatingWebhookConfiguration").path(
            name=s.webhook_configuration)

    async def reconcile(self, force_serving: bool = False,
                        force_ca: bool = False) -> TLSState | None:
        mwc = await self.api.get_or_none(self._mwc_path)
        if mwc is not None and CERT_MANAGER_ANNOTATION in (
                (mwc.get("metadata") or {}).get("annotations") or {}):
            return None  # cert-manager provides the certificate and injects the CA
        secret = await self.api.get_or_none(self._secret_path)
        state = state_from_secret(secret)
        new = plan(state, self.settings.names, self.settings.lifetimes, self.clock(),
                   force_serving, force_ca)
        if new != state:
            body = secret_for(new, self.settings,
                              (secret or {}).get("metadata", {}).get("resourceVersion"))
            if secret is None:
                await self.api.create(kinds.kind("Secret").path(self.settings.namespace),
                                      body)
            else:
                await self.api.request("PUT", self._secret_path, body)
            log.info("webhook TLS secret updated (phase %r)", new.phase.value)
        if mwc is not None:
            await self._inject(mwc, new.bundle)
        return new

    async def _inject(self, mwc: dict[str, Any], bundle: bytes) -> None:
        want = _b64(bundle)
        ops = [{"op": "replace" if "caBundle" in (w.get("clientConfig") or {}) else "add",
                "path": f"/webhooks/{i}/clientConfig/caBundle", "value": want}
               for i, w in enumerate(mwc.get("webhooks") or [])
               if (w.get("clientConfig") or {}).get("caBundle") != want]
        if ops:
            # The test op makes a concurrent edit fail (409/422) instead of being overwritten.
            ops.insert(0, {"op": "test", "path": "/metadata/resourceVersion",
                           "value": mwc["metadata"]["resourceVersion"]})
            await self.api.patch(self._mwc_path, ops, "json")
            log.info("caBundle injected into %d webhook(s)", len(ops) - 1)
