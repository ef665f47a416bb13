"""How the webhook authenticates to the API server: in-cluster ServiceAccount or a kubeconfig.

A small loader of its own instead of the kubernetes client's: importing that client costs the
hot-path process about 40 MiB of memory for the one GET it needs.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from webhook.errors import CredentialsError

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass
class Credentials:
    server: str
    tls: ssl.SSLContext
    token: str | None = None
    token_file: Path | None = None
    _read_at: float = 0.0

    def authorization(self) -> str | None:
        """The bearer header; projected tokens rotate, so the file is re-read every minute."""
        if self.token_file is not None and time.monotonic() - self._read_at > 60:
            self.token = self.token_file.read_text().strip()
            self._read_at = time.monotonic()
        return f"Bearer {self.token}" if self.token else None


def in_cluster() -> Credentials:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get(
        "KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise CredentialsError("not in a cluster (KUBERNETES_SERVICE_HOST unset) and no "
                               "kubeconfig given (COMPACTOR_WEBHOOK_KUBECONFIG)")
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    tls = ssl.create_default_context(cafile=str(SA_DIR / "ca.crt"))
    creds = Credentials(server, tls, token_file=SA_DIR / "token")
    creds.authorization()
    return creds


def _material(entry: dict[str, Any], key: str, base: Path) -> str | None:
    """A file path for ``key`` or ``key-data`` (inline base64, written to a private file)."""
    if entry.get(key):
        p = Path(entry[key])
        return str(p if p.is_absolute() else base / p)
    data = entry.get(f"{key}-data")
    if not data:
        return None
    fd, name = tempfile.mkstemp(prefix="compactor-webhook-")
    with os.fdopen(fd, "wb") as f:
        f.write(base64.b64decode(data))
    return name


def from_kubeconfig(file: str) -> Credentials:
    path = Path(file)
    try:
        config = yaml.safe_load(path.read_text())
        context_name = config["current-context"]
        context = next(c["context"] for c in config["contexts"] if c["name"] == context_name)
        cluster = next(c["cluster"] for c in config["clusters"]
                       if c["name"] == context["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
    except (OSError, KeyError, StopIteration, TypeError, yaml.YAMLError) as e:
        raise CredentialsError(f"cannot read kubeconfig {file}: {e!r}") from e
    tls = ssl.create_default_context(cafile=_material(cluster, "certificate-authority",
                                                      path.parent))
    cert = _material(user, "client-certificate", path.parent)
    if cert:
        tls.load_cert_chain(cert, _material(user, "client-key", path.parent))
    token = user.get("token")
    token_file = Path(user["tokenFile"]) if user.get("tokenFile") else None
    creds = Credentials(str(cluster["server"]).rstrip("/"), tls, token, token_file)
    creds.authorization()
    return creds
