"""The real webhook server on TLS against hostile clients: slowloris connections, clients that
never read, handshakes that never finish, oversized headers and old TLS versions. Each limit
is one of webhook/settings.py, here shortened so that the test is quick."""

from __future__ import annotations

import contextlib
import math
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from localcluster import Cluster, Kube
from localcluster.chaos.hostile import HostileLoad, admissions, client_context
from localcluster.cluster.kube import path
from tests.integration.helpers import start_webhook_process
from tests.unit.webhook_fakes import pod, review
from webhook.review import OwnerRef

DEADLINE = 2.0  # read, write and handshake deadlines of the server under test


@pytest.fixture(scope="module")
def server(cluster: Cluster, kube: Kube, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[int]:
    workdir = tmp_path_factory.mktemp("hostile")
    cert, key = cluster.ca.serving(["localhost"], ["127.0.0.1"]).write(workdir, "webhook")
    proc, port = start_webhook_process(cluster, kube, workdir, cert, key, {
        "COMPACTOR_WEBHOOK_READ_TIMEOUT_SECONDS": str(DEADLINE),
        "COMPACTOR_WEBHOOK_WRITE_TIMEOUT_SECONDS": str(DEADLINE),
        "COMPACTOR_WEBHOOK_TLS_HANDSHAKE_TIMEOUT_SECONDS": str(DEADLINE)})
    try:
        yield port
    finally:
        proc.stop()
        cluster.processes.remove(proc)


@pytest.fixture(scope="module")
def owned_review(kube: Kube) -> bytes:
    """A Pod of a real ReplicaSet (no Deployment above it): a whole owner lookup, no patch."""
    ns = f"hostile-{uuid.uuid4().hex[:6]}"
    kube.ensure_namespace(ns)
    rs = kube.create(path("replicasets", ns), {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-abc"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "pause"}]}}}})
    owner = OwnerRef("apps/v1", "ReplicaSet", "web-abc", rs["metadata"]["uid"])
    return review(pod(ns, owner), namespace=ns)


def test_slow_and_deaf_clients_are_cut_off_while_admissions_are_answered(
        server: int, owned_review: bytes) -> None:
    url = f"https://127.0.0.1:{server}/mutate"
    with HostileLoad("127.0.0.1", server, slowloris=200, nonreaders=20, byte_interval=0.3,
                     give_up=15) as load:
        normal = admissions(url, lambda: owned_review, count=100, interval=0.03)
    hostile = load.outcome()
    assert hostile.slowloris_connected == 200
    # Closed by the server on its read deadline (from each connection's first byte), not
    # by the clients giving up (inf).
    assert max(hostile.slowloris_open) < DEADLINE + 2, sorted(hostile.slowloris_open)[-5:]
    # A non-reader's deadline starts once the server's buffers for it are full, a few
    # seconds of answers in; then nothing but that deadline closes a busy connection.
    assert not any(math.isinf(s) for s in hostile.nonreaders_open), hostile.nonreaders_open
    # No normal admission refused or late: a slow client starves nobody. (1 s is the
    # Kubernetes SLO for a mutating API call; the figure itself comes from make chaos.)
    assert normal.failures == 0, normal
    assert normal.p99_ms < 1000, normal


def _handshake(port: int, lowest: ssl.TLSVersion, highest: ssl.TLSVersion,
               ciphers: str | None = None) -> tuple[str | None, tuple[str, str, int] | None]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    # Security level 0: this OpenSSL would otherwise refuse to offer TLS 1.0/1.1 at all.
    ctx.set_ciphers(ciphers or "DEFAULT:@SECLEVEL=0")
    ctx.minimum_version, ctx.maximum_version = lowest, highest
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            ctx.wrap_socket(raw, server_hostname="compactor-webhook") as tls:
        return tls.version(), tls.cipher()


@contextmanager
def _permissive_server(cluster: Cluster, workdir: Path) -> Iterator[int]:
    """A TLS server that accepts TLS 1.0 and 1.1: proof that the old-version client below
    really offers them (this OpenSSL refuses to at its default security level)."""
    cert, key = cluster.ca.serving(["localhost"], ["127.0.0.1"]).write(workdir, "old")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    ctx.minimum_version = ssl.TLSVersion.TLSv1
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)

    def serve() -> None:
        with contextlib.suppress(OSError):
            for _ in range(2):
                conn, _ = listener.accept()
                with contextlib.suppress(OSError), ctx.wrap_socket(conn, server_side=True):
                    pass
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        listener.close()
        thread.join(10)


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
def test_a_client_offering_only_tls_1_0_or_1_1_is_refused(
        server: int, cluster: Cluster, tmp_path: Path) -> None:
    old = [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1]
    with _permissive_server(cluster, tmp_path) as port:
        offered = [_handshake(port, version, version)[0] for version in old]
    assert offered == ["TLSv1", "TLSv1.1"]
    for version in old:
        with pytest.raises(ssl.SSLError):
            _handshake(server, version, version)
    # The same client, allowed 1.2 as well, gets in: the refusal is the version's.
    assert _handshake(server, ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_2)[0] == "TLSv1.2"


def test_tls_1_2_only_with_forward_secret_aead_suites(server: int) -> None:
    for weak in ("ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA384", "AES128-GCM-SHA256"):
        with pytest.raises(ssl.SSLError):
            _handshake(server, ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2, weak)
    version, cipher = _handshake(server, ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2,
                                 "ECDHE-ECDSA-AES128-GCM-SHA256")
    assert version == "TLSv1.2" and cipher is not None and cipher[0] == \
        "ECDHE-ECDSA-AES128-GCM-SHA256"
    version, _ = _handshake(server, ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.MAXIMUM_SUPPORTED)
    assert version == "TLSv1.3"


def _closed_after(sock: socket.socket, limit: float) -> float:
    """Seconds until the server closes ``sock`` (reading returns nothing or resets)."""
    sock.settimeout(limit)
    started = time.monotonic()
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass
    return time.monotonic() - started


def test_a_handshake_that_never_finishes_is_closed(server: int) -> None:
    with socket.create_connection(("127.0.0.1", server), timeout=5) as raw:
        raw.sendall(b"\x16\x03\x01")  # the first bytes of a ClientHello, then nothing
        assert _closed_after(raw, DEADLINE + 5) < DEADLINE + 2


def test_headers_past_the_limit_are_refused(server: int, tmp_path: Path) -> None:
    with socket.create_connection(("127.0.0.1", server), timeout=5) as raw, \
            client_context().wrap_socket(raw, server_hostname="compactor-webhook") as tls:
        tls.sendall(b"POST /mutate HTTP/1.1\r\nHost: w\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n")
        tls.settimeout(5)
        answer = tls.recv(200)
    assert answer.startswith(b"HTTP/1.1 400"), answer
