"""Webhook TLS on the real API server: rotation with zero failed admissions, caBundle repair,
the cert-manager opt-out, and a webhook that refuses a certificate for the wrong names."""

from __future__ import annotations

import base64
import datetime
import os
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from certs import certificate
from certs.authority import service_names
from certs.manager import CertManager, CertSettings
from certs.rotation import Lifetimes, Names
from compaction.intent import Intent
from controller.kubeapi.client import Api
from localcluster import ApiError, Cluster, Kube
from localcluster.cluster.kube import path, wait_for
from tests.integration.helpers import (
    WEBHOOK_NAMESPACE_LABEL,
    AheadClock,
    start_webhook_process,
    webhook_configuration,
)

INTENT = Intent("tls-policy", {"compactor.dev/policy": "tls-policy"}, "compactor-scheduler")


def _sync_files(kube: Kube, secret: str, directory: Path) -> None:
    """What the kubelet does for a mounted Secret: swap the files in."""
    data = kube.get(path("secrets", "compactor-system", secret))["data"]
    for key in ("tls.crt", "tls.key"):
        tmp = directory / f".{key}.tmp"
        tmp.write_bytes(base64.b64decode(data[key]))
        tmp.replace(directory / key)


def _served_fingerprint(port: int) -> str:
    pem = ssl.get_server_certificate(("127.0.0.1", port)).encode()
    return certificate.read(pem).fingerprint


def _mwc_bundle(kube: Kube, name: str) -> bytes:
    mwc = kube.get(path("mutatingwebhookconfigurations", name=name))
    return base64.b64decode(mwc["webhooks"][0]["clientConfig"].get("caBundle", ""))


@pytest_asyncio.fixture
async def api(cluster: Cluster) -> AsyncIterator[Api]:
    client = await Api.connect(str(cluster.kubeconfig))
    yield client
    await client.close()


def _settings(secret: str, mwc: str, overlap: float = 2.0) -> CertSettings:
    return CertSettings(
        namespace="compactor-system", secret=secret, webhook_configuration=mwc,
        names=Names(("localhost", *service_names("compactor-webhook", "compactor-system")),
                    ("127.0.0.1",)),
        lifetimes=Lifetimes(ca=datetime.timedelta(days=30), serving=datetime.timedelta(days=7),
                            overlap=datetime.timedelta(seconds=overlap)))


class Traffic(threading.Thread):
    """Creates Pods owned by an annotated CronJob until stopped; every admission must succeed
    (failurePolicy Fail) and every Pod must come back mutated."""

    def __init__(self, kube: Kube, namespace: str, owner: dict[str, Any]) -> None:
        super().__init__(daemon=True)
        self.kube, self.namespace, self.owner = kube, namespace, owner
        self.stop = threading.Event()
        self.created = 0
        self.failures: list[str] = []

    def run(self) -> None:
        while not self.stop.is_set():
            pod = {"metadata": {"generateName": "t-", "ownerReferences": [self.owner]},
                   "spec": {"containers": [{"name": "c", "image": "pause"}]}}
            try:
                made = self.kube.create(path("pods", self.namespace), pod)
                self.created += 1
                if (made["metadata"].get("labels") or {}).get("compactor.dev/policy") != \
                        "tls-policy":
                    self.failures.append(f"{made['metadata']['name']} not mutated")
            except ApiError as e:
                self.failures.append(str(e))
            time.sleep(0.05)

    def admit(self, count: int) -> None:
        """Returns once ``count`` more Pods were admitted (or one failed): every step of a
        rotation is taken under traffic."""
        target = self.created + count
        wait_for(f"{count} more admissions",
                 lambda: self.created >= target or self.failures, interval=0.02)


@pytest.mark.asyncio
async def test_serving_and_ca_rotation_under_load_fail_no_admission(
        cluster: Cluster, kube: Kube, namespace: str, api: Api, tmp_path: Path) -> None:
    kube.ensure_namespace("compactor-system")
    secret, mwc = f"tls-{uuid.uuid4().hex[:6]}", f"rotation-{uuid.uuid4().hex[:6]}"
    # The CA rotation's steps wait out an overlap; the manager's clock skips it (a minute:
    # never over by accident while the test runs).
    overlap = datetime.timedelta(minutes=1)
    clock = AheadClock()
    manager = CertManager(api, _settings(secret, mwc, overlap.total_seconds()), clock=clock)
    first = await manager.reconcile()
    assert first is not None
    _sync_files(kube, secret, tmp_path)
    proc, port = start_webhook_process(cluster, kube, tmp_path, tmp_path / "tls.crt",
                                       tmp_path / "tls.key",
                                       {"COMPACTOR_WEBHOOK_CERT_RELOAD_SECONDS": "0.2"})
    try:
        selector = f"rot-{uuid.uuid4().hex[:4]}"
        kube.patch(path("namespaces", name=namespace),
                   {"metadata": {"labels": {WEBHOOK_NAMESPACE_LABEL: selector}}})
        # Registered without a bundle: the controller injects it.
        kube.create(path("mutatingwebhookconfigurations"),
                    webhook_configuration(mwc, port, selector, None, failure_policy="Fail"))
        await manager.reconcile()
        assert _mwc_bundle(kube, mwc) == first.bundle
        cron = kube.create(path("cronjobs", namespace), {
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "owner", "annotations": {
                "compactor.dev/intent": INTENT.render()}},
            "spec": {"schedule": "0 0 1 1 *", "suspend": True, "jobTemplate": {"spec": {
                "template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": "c", "image": "pause"}]}}}}}})
        owner = {"apiVersion": "batch/v1", "kind": "CronJob", "name": "owner",
                 "uid": cron["metadata"]["uid"], "controller": True}

        def mutated() -> bool:
            try:
                made = kube.create(path("pods", namespace), {
                    "metadata": {"generateName": "probe-", "ownerReferences": [owner]},
                    "spec": {"containers": [{"name": "c", "image": "pause"}]}})
            except ApiError:
                return False
            return bool((made["metadata"].get("labels") or {}).get("compactor.dev/policy"))
        wait_for("the API server to use the webhook", mutated, interval=0.3)

        traffic = Traffic(kube, namespace, owner)
        traffic.start()
        try:
            traffic.admit(8)
            # 1. A forced serving-certificate rotation, reloaded without a restart.
            old_serving = _served_fingerprint(port)
            state = await manager.reconcile(force_serving=True)
            assert state is not None
            _sync_files(kube, secret, tmp_path)
            wanted = certificate.read(state.serving.cert_pem).fingerprint
            wait_for("the new serving certificate", lambda: _served_fingerprint(port) == wanted)
            assert wanted != old_serving
            traffic.admit(8)

            # 2. A forced CA rotation, in its three steps.
            old_ca = state.ca.cert_pem
            state = await manager.reconcile(force_ca=True)
            assert state is not None and state.phase == "pending-serving"
            assert certificate.split_bundle(_mwc_bundle(kube, mwc)) == [old_ca, state.ca.cert_pem]
            new_ca = state.ca.cert_pem
            # What the overlap is for: the API server loads the two-CA bundle (here in well
            # under the time these admissions take) before a certificate of the new CA is
            # served.
            traffic.admit(8)
            assert await manager.reconcile() == state, "no step before the overlap is over"
            clock.ahead += overlap
            state = await manager.reconcile()
            assert state is not None and state.phase == "pending-retire"
            assert certificate.signed_by(state.serving.cert_pem, new_ca)
            _sync_files(kube, secret, tmp_path)
            wanted = certificate.read(state.serving.cert_pem).fingerprint
            wait_for("the serving certificate of the new CA",
                     lambda: _served_fingerprint(port) == wanted)
            traffic.admit(8)
            clock.ahead += overlap
            state = await manager.reconcile()
            assert state is not None and state.phase == ""
            assert certificate.split_bundle(_mwc_bundle(kube, mwc)) == [new_ca]
            traffic.admit(8)
        finally:
            traffic.stop.set()
            traffic.join()
        assert traffic.created >= 40, traffic.created
        assert traffic.failures == [], traffic.failures[:5]
    finally:
        kube.delete(path("mutatingwebhookconfigurations", name=mwc))
        proc.stop()
        cluster.processes.remove(proc)


@pytest.mark.asyncio
async def test_a_wiped_ca_bundle_is_put_back(kube: Kube, api: Api) -> None:
    kube.ensure_namespace("compactor-system")
    secret, mwc = f"tls-{uuid.uuid4().hex[:6]}", f"wiped-{uuid.uuid4().hex[:6]}"
    kube.create(path("mutatingwebhookconfigurations"),
                webhook_configuration(mwc, 9, "nobody", None))
    try:
        manager = CertManager(api, _settings(secret, mwc))
        state = await manager.reconcile()
        assert state is not None and _mwc_bundle(kube, mwc) == state.bundle
        # A person (or a GitOps tool re-applying its copy) resets the bundle.
        kube.patch(path("mutatingwebhookconfigurations", name=mwc),
                   [{"op": "remove", "path": "/webhooks/0/clientConfig/caBundle"}], "json")
        assert _mwc_bundle(kube, mwc) == b""
        again = await manager.reconcile()
        assert again == state, "nothing is re-issued to repair the bundle"
        assert _mwc_bundle(kube, mwc) == state.bundle
    finally:
        kube.delete(path("mutatingwebhookconfigurations", name=mwc))
        kube.delete(path("secrets", "compactor-system", secret))


@pytest.mark.asyncio
async def test_cert_manager_mode_manages_nothing(kube: Kube, api: Api) -> None:
    kube.ensure_namespace("compactor-system")
    secret, mwc = f"tls-{uuid.uuid4().hex[:6]}", f"cm-{uuid.uuid4().hex[:6]}"
    config = webhook_configuration(mwc, 9, "nobody", None)
    config["metadata"]["annotations"] = {
        "cert-manager.io/inject-ca-from": "compactor-system/compactor-webhook"}
    kube.create(path("mutatingwebhookconfigurations"), config)
    try:
        assert await CertManager(api, _settings(secret, mwc)).reconcile() is None
        with pytest.raises(ApiError) as err:
            kube.get(path("secrets", "compactor-system", secret))
        assert err.value.status == 404
        assert _mwc_bundle(kube, mwc) == b""
    finally:
        kube.delete(path("mutatingwebhookconfigurations", name=mwc))


def test_webhook_refuses_a_certificate_for_other_names(cluster: Cluster, tmp_path: Path) -> None:
    cert, key = cluster.ca.serving(["somewhere-else"], ["127.0.0.1"]).write(tmp_path, "bad")
    env = {**os.environ, "COMPACTOR_WEBHOOK_CERT_FILE": str(cert),
           "COMPACTOR_WEBHOOK_KEY_FILE": str(key), "COMPACTOR_WEBHOOK_PORT": "1",
           "COMPACTOR_WEBHOOK_SERVICE_NAME": "compactor-webhook",
           "COMPACTOR_WEBHOOK_SERVICE_NAMESPACE": "compactor-system"}
    out = subprocess.run([sys.executable, "-m", "webhook"], env=env, capture_output=True,
                         text=True, timeout=30, check=False)
    assert out.returncode == 2
    assert "does not cover the webhook Service names" in out.stderr
    assert "compactor-webhook.compactor-system.svc" in out.stderr
