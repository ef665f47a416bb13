"""The webhook's own credential loader: kubeconfig files (paths or inline data), tokens."""

from __future__ import annotations

import base64
import datetime
from pathlib import Path

import pytest
import yaml

from certs.authority import issue_ca
from webhook.credentials import from_kubeconfig, in_cluster
from webhook.errors import CredentialsError

CA = issue_ca("test-ca", datetime.timedelta(days=1), datetime.datetime.now(datetime.UTC))


def _config(cluster: dict[str, str], user: dict[str, str]) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:6443/",
                                                     **cluster}}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}


def test_token_kubeconfig_with_inline_ca(tmp_path: Path) -> None:
    file = tmp_path / "kc"
    file.write_text(yaml.safe_dump(_config(
        {"certificate-authority-data": base64.b64encode(CA.cert_pem).decode()},
        {"token": "abc"})))
    creds = from_kubeconfig(str(file))
    assert creds.server == "https://127.0.0.1:6443"
    assert creds.authorization() == "Bearer abc"


def test_relative_ca_path_and_token_file_are_read(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_bytes(CA.cert_pem)
    (tmp_path / "token").write_text("from-file\n")
    file = tmp_path / "kc"
    file.write_text(yaml.safe_dump(_config({"certificate-authority": "ca.crt"},
                                           {"tokenFile": str(tmp_path / "token")})))
    assert from_kubeconfig(str(file)).authorization() == "Bearer from-file"


def test_broken_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    file = tmp_path / "kc"
    file.write_text("current-context: missing\ncontexts: []\n")
    with pytest.raises(CredentialsError, match="cannot read kubeconfig"):
        from_kubeconfig(str(file))


def test_outside_a_cluster_without_kubeconfig_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(CredentialsError, match="not in a cluster"):
        in_cluster()
