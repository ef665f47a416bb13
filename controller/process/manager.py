"""The controller process: leader election, watches that wake the reconciler, periodic resync."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from certs.manager import CertManager
from compaction import kinds
from controller.act.metrics import ControllerMetrics
from controller.kubeapi.client import Api, ApiError
from controller.kubeapi.informer import Informers, sleep_or_stop
from controller.process.health import Heartbeat, Probes, serve
from controller.process.lease import LeaderElector
from controller.process.reconciler import Reconciler
from controller.process.settings import ControllerSettings, SettingsError, load
from controller.read.sources import sources

log = logging.getLogger("compactor.controller")

# How long a new leader waits for its caches before a first pass (which lists what is not
# synced yet): long enough for a large cluster's Pods, short enough to act when a kind fails.
SYNC_TIMEOUT_SECONDS = 60.0


class Manager:
    def __init__(self, api: Api, settings: ControllerSettings, reconciler: Reconciler,
                 informers: Informers | None = None,
                 heartbeat: Heartbeat | None = None) -> None:
        self.api, self.settings, self.reconciler = api, settings, reconciler
        # Beaten each time the loop comes round, leader or not: /livez reads it.
        self.heartbeat = heartbeat or Heartbeat()
        self.elector = LeaderElector(api, settings.namespace, "compactor-controller",
                                     settings.identity, settings.lease_seconds)
        self.wake = asyncio.Event()
        self.informers = informers or Informers(api, sources(settings.namespace))
        self.informers.wake = self.wake.set
        self.passes = 0
        self.certs = CertManager(api, settings.certs) if settings.certs else None

    async def run(self, stop: asyncio.Event,
                  on_pass: Callable[[], Awaitable[None]] | None = None) -> None:
        watchers = [asyncio.create_task(self.informers.run(stop))]
        last = 0.0
        fault = self.settings.fault_stall_after_seconds
        stall_at = None if fault is None else time.monotonic() + fault
        try:
            while not stop.is_set():
                self.heartbeat.beat()
                if stall_at is not None and time.monotonic() >= stall_at:
                    log.warning("COMPACTOR_CONTROLLER_FAULT_STALL_AFTER_SECONDS: the pass loop "
                                "stops here, as a hung one would")
                    await stop.wait()
                    break
                deferred = False
                leading = await self.elector.step()
                self.reconciler.metrics.leader.set(1.0 if leading else 0.0)
                if leading and self.certs is not None:
                    try:
                        await self.certs.reconcile()
                    except ApiError as e:
                        log.warning("webhook certificates: %s", e)
                due = time.monotonic() - last >= self.settings.resync_seconds
                if leading and not self.passes:
                    await self.informers.wait_synced(self.informers.by_path, stop,
                                                     SYNC_TIMEOUT_SECONDS)
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
                        if summary.deferred:  # Pods left to converge: go on at once
                            log.info("%d Pod patches left to the next pass", summary.deferred)
                            self.wake.set()
                            deferred = True
                    except ApiError as e:
                        log.warning("pass failed, retrying: %s", e)
                        self.wake.set()
                    last = time.monotonic()
                    if on_pass:
                        await on_pass()
                if deferred:
                    continue  # no debounce: the work is already known
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._next_wake(stop),
                                           self.settings.lease_seconds / 3)
                await sleep_or_stop(stop, self.settings.debounce_seconds)
        finally:
            for w in watchers:
                w.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
            await self.elector.release()
            self.reconciler.metrics.leader.set(0.0)

    async def _next_wake(self, stop: asyncio.Event) -> None:
        waits = [asyncio.create_task(self.wake.wait()), asyncio.create_task(stop.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in waits:
                t.cancel()


CONTAINER = "controller"  # the controller's container in its Deployment


def own_image(pod: Mapping[str, Any] | None) -> str | None:
    """The image this Pod's controller container runs, which the compaction scheduler's
    extender runs from too (kustomize's and Helm's image settings reach it there)."""
    containers = ((pod or {}).get("spec") or {}).get("containers") or []
    named = [c for c in containers if c.get("name") == CONTAINER] or containers[:1]
    if not named:
        return None
    return str(named[0].get("image") or "") or None


async def with_extender_image(api: Api, settings: ControllerSettings) -> ControllerSettings:
    """Unless COMPACTOR_EXTENDER_IMAGE names one, the extender's image is the controller's
    own, read once from its Pod; outside a Pod (or unreadable) there is no extender."""
    runtime = settings.plan.runtime
    if runtime.extender_image is not None:
        return settings
    path = kinds.kind("Pod").path(settings.namespace, settings.identity)
    try:
        image = own_image(await api.get_or_none(path))
    except ApiError as e:
        log.warning("cannot read this Pod's image (%s): the compaction scheduler runs without "
                    "its extender", e.message)
        return settings
    if image is None:
        log.info("no Pod %s: the compaction scheduler runs without its extender", path)
        return settings
    return dataclasses.replace(settings, plan=dataclasses.replace(
        settings.plan, runtime=dataclasses.replace(runtime, extender_image=image)))


async def _main(settings: ControllerSettings) -> None:
    metrics = ControllerMetrics()
    api = await Api.connect(settings.kubeconfig)
    settings = await with_extender_image(api, settings)
    metrics.api_requests.set_function(lambda: float(api.requests))
    metrics.api_watches.set_function(lambda: float(api.watches))
    metrics.api_throttled.set_function(lambda: float(api.throttled))
    metrics.api_cache_behind.set_function(lambda: float(api.behind))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        informers = Informers(api, sources(settings.namespace))
        metrics.informed_objects.set_function(lambda: float(informers.objects()))
        heartbeat = Heartbeat()
        if settings.metrics_port:
            serve(settings.metrics_port, settings.metrics_address, metrics.registry,
                  Probes(heartbeat, settings.stalled_after_seconds, informers.unsettled))
        reconciler = Reconciler(api, settings.plan, metrics=metrics, informers=informers,
                                patch_concurrency=settings.patch_concurrency,
                                pass_budget=settings.pass_budget_seconds)
        await Manager(api, settings, reconciler, informers, heartbeat).run(stop)
    finally:
        await api.close()


def main() -> None:
    try:
        settings = load()
    except SettingsError as e:
        logging.basicConfig(format="%(levelname)s %(name)s %(message)s")
        log.error("refusing to start: %s", e)
        sys.exit(2)
    logging.basicConfig(level=settings.log_level,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    quiet_client_logs()
    asyncio.run(_main(settings))


# At DEBUG, kubernetes-asyncio logs every response body whole: Pod specs with their env,
# Secrets with their keys. Whatever the controller's own level, that logger stays above it.
BODY_LOGGERS = ("kubernetes_asyncio.client.rest",)


def quiet_client_logs() -> None:
    for name in BODY_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(max(logging.INFO, logging.getLogger().getEffectiveLevel()))
