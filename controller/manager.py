"""The controller process: leader election, watches that wake the reconciler, periodic resync."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from prometheus_client import start_http_server

from certs.authority import service_names
from certs.manager import CertManager, CertSettings
from certs.rotation import Lifetimes, Names
from compaction import kinds, names
from compaction.duration import parse_duration
from compaction.workload import WorkloadType
from controller import runtime
from controller.api import Api, ApiError
from controller.informer import Informers, sleep_or_stop
from controller.lease import LeaderElector
from controller.metrics import ControllerMetrics
from controller.pods import slim_owner, slim_pod
from controller.reconciler import INFORMED, JOBS, PODS, POLICIES, REPLICA_SETS, Reconciler
from controller.runtime_hook import RuntimeHook
from controller.workloads import list_path

log = logging.getLogger("compactor.controller")


@dataclass(frozen=True)
class ManagerSettings:
    namespace: str = names.INSTALL_NAMESPACE
    kubeconfig: str | None = None
    resync_seconds: float = 30.0
    debounce_seconds: float = 1.0
    lease_seconds: int = 15
    identity: str = ""
    certs: CertSettings | None = None

    @classmethod
    def from_env(cls) -> ManagerSettings:
        env = os.environ
        return cls(
            namespace=env.get("COMPACTOR_NAMESPACE", names.INSTALL_NAMESPACE),
            kubeconfig=env.get("COMPACTOR_CONTROLLER_KUBECONFIG") or env.get("KUBECONFIG"),
            resync_seconds=float(env.get("COMPACTOR_CONTROLLER_RESYNC_SECONDS", "30")),
            identity=env.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}",
            certs=cert_settings(env),
        )


def cert_settings(env: Mapping[str, str]) -> CertSettings | None:
    """Self-managed webhook TLS unless COMPACTOR_CERTS_MODE is cert-manager (or off)."""
    if env.get("COMPACTOR_CERTS_MODE", "self") != "self":
        return None
    ns = env.get("COMPACTOR_NAMESPACE", names.INSTALL_NAMESPACE)
    service = env.get("COMPACTOR_WEBHOOK_SERVICE", "compactor-webhook")
    extra = [s.strip() for s in env.get("COMPACTOR_CERT_EXTRA_SANS", "").split(",") if s.strip()]
    ips = tuple(s for s in extra if s.replace(".", "").isdigit() or ":" in s)
    dns = tuple(service_names(service, ns)) + tuple(s for s in extra if s not in ips)
    d = Lifetimes()

    def life(name: str, default: datetime.timedelta) -> datetime.timedelta:
        raw = env.get(name)
        return parse_duration(raw) if raw else default

    return CertSettings(
        namespace=ns, secret=env.get("COMPACTOR_WEBHOOK_SECRET", "compactor-webhook-tls"),
        webhook_configuration=env.get("COMPACTOR_WEBHOOK_CONFIGURATION", "compactor-webhook"),
        names=Names(dns, ips),
        lifetimes=Lifetimes(ca=life("COMPACTOR_CERT_CA_LIFETIME", d.ca),
                            serving=life("COMPACTOR_CERT_SERVING_LIFETIME", d.serving),
                            overlap=life("COMPACTOR_CERT_OVERLAP", d.overlap)))


WATCHED = [POLICIES, kinds.kind("Namespace").path(), kinds.kind("Node").path(),
           *(list_path(k) for k in WorkloadType)]


class Manager:
    def __init__(self, api: Api, settings: ManagerSettings, reconciler: Reconciler,
                 informers: Informers | None = None) -> None:
        self.api, self.settings, self.reconciler = api, settings, reconciler
        self.elector = LeaderElector(api, settings.namespace, "compactor-controller",
                                     settings.identity, settings.lease_seconds)
        self.wake = asyncio.Event()
        # Changes to what WATCHED names wake the reconciler; the informers of its bulk reads
        # (Pods, ReplicaSets, Jobs) only keep their caches (workload status changes wake it).
        self.informers = informers or Informers(api, waking=WATCHED)
        self.informers.wake = self.wake.set
        self.passes = 0
        self.certs = CertManager(api, settings.certs) if settings.certs else None

    async def run(self, stop: asyncio.Event,
                  on_pass: Callable[[], Awaitable[None]] | None = None) -> None:
        watchers = [asyncio.create_task(self.informers.run(stop))]
        last = 0.0
        try:
            while not stop.is_set():
                leading = await self.elector.step()
                if leading and self.certs is not None:
                    try:
                        await self.certs.reconcile()
                    except ApiError as e:
                        log.warning("webhook certificates: %s", e)
                due = time.monotonic() - last >= self.settings.resync_seconds
                if leading and (self.wake.is_set() or due):
                    self.wake.clear()
                    try:
                        started = time.monotonic()
                        summary = await self.reconciler.reconcile()
                        self.reconciler.metrics.passes.observe(time.monotonic() - started)
                        self.reconciler.metrics.errors.inc(len(summary.errors))
                        self.passes += 1
                        if summary.errors:
                            log.warning("pass finished with %d errors: %s",
                                        len(summary.errors), summary.errors[:3])
                    except ApiError as e:
                        log.warning("pass failed, retrying: %s", e)
                        self.wake.set()
                    last = time.monotonic()
                    if on_pass:
                        await on_pass()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._next_wake(stop),
                                           self.settings.lease_seconds / 3)
                await sleep_or_stop(stop, self.settings.debounce_seconds)
        finally:
            for w in watchers:
                w.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
            await self.elector.release()

    async def _next_wake(self, stop: asyncio.Event) -> None:
        waits = [asyncio.create_task(self.wake.wait()), asyncio.create_task(stop.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in waits:
                t.cancel()


async def _main() -> None:
    settings = ManagerSettings.from_env()
    rt = runtime.load()
    metrics = ControllerMetrics()
    port = int(os.environ.get("COMPACTOR_CONTROLLER_METRICS_PORT", "8080"))
    if port:
        start_http_server(port, registry=metrics.registry)
    api = await Api.connect(settings.kubeconfig)
    metrics.api_requests.set_function(lambda: float(api.requests))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        grace = float(os.environ.get("COMPACTOR_CONTROLLER_INTENT_GRACE_SECONDS", "35"))
        hook = RuntimeHook(api, metrics, intent_grace=datetime.timedelta(seconds=grace))
        informers = Informers(api, waking=WATCHED, cached=INFORMED, slim={
            PODS: slim_pod, REPLICA_SETS: slim_owner, JOBS: slim_owner})
        metrics.informed_objects.set_function(lambda: float(informers.objects()))
        reconciler = Reconciler(api, rt, settings.namespace, metrics=metrics, hook=hook,
                                reads=informers)
        await Manager(api, settings, reconciler, informers).run(stop)
    finally:
        await api.close()


def main() -> None:
    logging.basicConfig(level=os.environ.get("COMPACTOR_LOG_LEVEL", "INFO").upper(),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    asyncio.run(_main())
