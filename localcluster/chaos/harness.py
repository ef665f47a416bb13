"""The whole stack on the local cluster, kept busy, with handles to break each part of it and
the means to count what a fault cost.

Layout: ``chaos`` holds Deployments scaled up and down all the time (a policy with the
runtime hook and the descheduler, on a pool of its own); ``hook`` and ``bulk`` hold
workloads placed before any policy covers them, for the controller kills; ``loop`` is a
namespace the webhook is never called for, so its workload's replacements come back
unpatched until loop detection suppresses it. Each pool's nodes carry a taint only the
harness's workloads tolerate; Compactor's own Pods keep to a node of their own.
Compactor's webhooks reach the API server through one relay and its controllers through
another (a fault can slow or cut either), and the API server reaches the webhooks through a
balancer. Everything listens on loopback.
"""

from __future__ import annotations

import contextlib
import datetime
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
import orjson

from compaction import names
from compaction.intent import parse_intent
from controller.plan.convergence import ConvergenceState
from localcluster.chaos.audit import AuditLog, evictions, pod_creations
from localcluster.chaos.background import DeschedulerLoop, LeaseWatch, Restarter
from localcluster.chaos.churn import Churn
from localcluster.chaos.relay import Relay
from localcluster.chaos.reliability import (
    FaultReport,
    duplicate_evictions,
    failed_window,
    hook_overlaps,
    over_limits,
    p99_ms,
    takeover,
)
from localcluster.chaos.scenario import (
    LIMITS,
    POOL_KEY,
    compliant,
    deployment,
    policy_spec,
    pool_taint,
)
from localcluster.chaos.timeline import PodTimeline
from localcluster.cluster import scrape
from localcluster.cluster.control_plane import Cluster, NodeShape
from localcluster.cluster.kube import ApiError, path, wait_for
from localcluster.cluster.process import Process
from localcluster.cluster.procstat import peak_rss_mib
from localcluster.cluster.stack import (
    LOCAL_WEBHOOK,
    CompactorStack,
    RunningController,
    wait_webhook_ready,
)

POLICY_API = f"apis/{names.API_VERSION}"
WEBHOOK_OFF = {"chaos.compactor.test/admission": "off"}
CONTROLLER_USER = f"system:serviceaccount:{names.INSTALL_NAMESPACE}:compactor-controller"
DESCHEDULER_USER = f"system:serviceaccount:{names.INSTALL_NAMESPACE}:compactor-descheduler"
LEASE_SECONDS = 15.0  # the controller's Lease duration (controller/process/settings.py)
FAILED_OPEN = "compactor_admission_failed_open_total"
# How long after a fault ends the Pods must stay converged: what the load creates right
# after it (the Deployment controller catching up, say) is judged too.
OBSERVE_AFTER = 10.0


# The node pool of each namespace's fixed Deployments: the hook's and the looping workload's
# alone on theirs, so that the plan frees the nodes they stand on.
_POOLS: Final = {"hook": "hook", "bulk": "static", "loop": "loop"}
_SHAPE: Final = NodeShape(cpu="8", memory="32Gi", pods="110")


@dataclass(frozen=True)
class ChaosConfig:
    churn_nodes: int = 4
    static_nodes: int = 3
    churned: int = 4  # Deployments scaled up and down
    low: int = 2
    high: int = 6
    churn_interval: float = 2.0
    rollout_every: float = 30.0
    hook_nodes: int = 2
    hook_workloads: int = 4
    hook_replicas: int = 3
    bulk_workloads: int = 2
    bulk_replicas: int = 100
    converge_timeout: float = 120.0
    descheduler_interval: float = 5.0
    webhook_cache_size: int = 64
    seed: int = 7
    secrets: dict[str, str] = field(default_factory=dict)  # planted: name -> value
    log_level: str = "info"  # of the webhooks and controllers


@dataclass
class Window:
    """One fault, from injection to convergence; the fault's code marks what happened."""

    fault: str
    converge: dict[str, bool]  # namespace -> whether the scheduler must be ours too
    started: datetime.datetime = field(
        default_factory=lambda: datetime.datetime.now(datetime.UTC))
    recovered_at: float | None = None
    killed: tuple[str, float] | None = None  # (controller identity, when)
    note: str = ""
    metrics_before: str = ""
    loop_before: tuple[bool, str, int] = (False, "", 0)
    webhook_failed_open_before: float = 0.0
    suppressed_before: set[str] = field(default_factory=set)
    # Pods that waited on a missing compaction scheduler past the bound (None: not measured).
    stranded: int | None = None

    def recovered(self) -> None:
        self.recovered_at = time.time()


class Chaos:
    def __init__(self, cluster: Cluster, workdir: Path, config: ChaosConfig) -> None:
        self.cluster, self.dir, self.config = cluster, workdir, config
        self.kube = cluster.client()
        self.stack = CompactorStack(cluster, self.kube, workdir)
        self.audit = AuditLog(cluster.audit_log)
        self.webhook_api = Relay([cluster.api_port], "webhook-api")
        self.controller_api = Relay([cluster.api_port], "controller-api")
        self.balancer = Relay([], "webhook-balancer")
        self.webhooks: dict[str, tuple[Process, int]] = {}
        self.controllers: dict[str, RunningController] = {}
        self.reports: list[FaultReport] = []
        self.churned = [f"chaos/web-{i}" for i in range(config.churned)]
        self.fixed = {**{f"hook/hook-{i}": config.hook_replicas
                         for i in range(config.hook_workloads)},
                      **{f"bulk/bulk-{i}": config.bulk_replicas
                         for i in range(config.bulk_workloads)}, "loop/looper": 1}
        self.churn: Churn | None = None
        self.timeline: PodTimeline | None = None
        self.lease: LeaseWatch | None = None
        self.descheduler: DeschedulerLoop | None = None
        self.restarter: Restarter | None = None

    # --- setup -------------------------------------------------------------------

    def start(self) -> None:
        c, kube = self.config, self.kube
        self.cluster.start_workers()
        self._pool("churn", [f"churn-{i}" for i in range(c.churn_nodes)])
        self._pool("static", [f"static-{i}" for i in range(c.static_nodes)])
        self._pool("hook", [f"hook-{i}" for i in range(c.hook_nodes)])
        self._pool("loop", ["loop-0"])
        self.cluster.add_nodes(kube, ["system-0"], _SHAPE)  # Compactor's own Pods
        for relay in (self.webhook_api, self.controller_api, self.balancer):
            relay.start()
        self.stack.install()
        self.add_webhook("webhook-a")
        self.stack.register_webhook(self.balancer.port, excluded=WEBHOOK_OFF, timeout_seconds=3)
        self.add_controller("controller-a")
        wait_for("controller-a leading", lambda: self._holder() == "controller-a", timeout=60)
        self.add_controller("controller-b")
        for ns in ("chaos", "hook", "bulk", "loop"):
            kube.ensure_namespace(ns, WEBHOOK_OFF if ns == "loop" else None,
                                  default_service_account=True)
        self._wait_webhook_called()
        # The harness judges convergence after each fault within a bound shorter than
        # evictReplacementsAfter's default (5 minutes), and loop detection needs a second
        # replacement soon after the first: both policies replace a replacement at once.
        self.apply_policy("chaos", policy_spec("chaos", True, True, pool="churn",
                                               evict_replacements_after="0s"))
        self.apply_policy("loop", policy_spec("loop", True, False, window="15m", threshold=2,
                                              suppression="1h", evict_replacements_after="0s"))
        self.stack.start_scheduler()
        env, notes = self._planted()
        for workload in self.churned:
            ns, name = workload.split("/")
            kube.create(path("deployments", ns), deployment(name, c.low, "churn", "100m",
                                                            "64Mi", env, notes))
        for workload, replicas in self.fixed.items():
            ns, name = workload.split("/")
            kube.create(path("deployments", ns), deployment(name, replicas, _POOLS[ns], "5m",
                                                            "8Mi", env, notes))
        wait_for("every Pod running", self._all_running, timeout=300, interval=1)
        # The runtime hook replaces only the Pods of the nodes the plan frees, and none whose
        # replacement would come back to its node (a tie counts as one). A half-full node
        # joining the hook's pool and the looping workload's, once every Pod runs, makes
        # every node their Pods stand on freeable, and is where the compaction scheduler
        # would put their replacements.
        for pool in ("hook", "loop"):
            self._pool(pool, [f"{pool}-half"])
            kube.create(path("pods", "kube-system"), {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{pool}-half-filler"},
                "spec": {"nodeName": f"{pool}-half", "containers": [{
                    "name": "c", "image": "pause", "resources": {"requests": {"cpu": "4"}}}]}})
        wait_for("the looping workload suppressed", self._loop_suppressed, timeout=180,
                 interval=1)
        self.timeline = PodTimeline(self.cluster.credentials,
                                    {"chaos", "hook", "bulk", "loop"}).start()
        self.lease = LeaseWatch(self.cluster.client()).start()
        self.churn = Churn(self.cluster.credentials, self.churned, c.low, c.low, c.high,
                           c.churn_interval, c.rollout_every, c.seed).start()
        desched = CompactorStack(self.cluster, self.cluster.client(), self.dir / "descheduler")
        self.descheduler = DeschedulerLoop(desched, "chaos", c.descheduler_interval).start()
        self.restarter = Restarter([self.cluster.process(names.MANAGED_SCHEDULER)]).start()

    def stop(self) -> None:
        for part in (self.restarter, self.churn, self.descheduler, self.timeline, self.lease):
            if part is not None:
                part.stop()
        for relay in (self.balancer, self.webhook_api, self.controller_api):
            relay.stop()
        self.kube.close()

    def _pool(self, pool: str, nodes: list[str]) -> None:
        self.cluster.add_nodes(self.kube, nodes, _SHAPE, labels={POOL_KEY: pool},
                               taints=[pool_taint(pool)])

    def _planted(self) -> tuple[dict[str, str], dict[str, str]]:
        env = {"CHAOS_SECRET": self.config.secrets["env"]} if "env" in self.config.secrets \
            else {}
        notes = {"chaos.compactor.test/token": self.config.secrets["annotation"]} \
            if "annotation" in self.config.secrets else {}
        return env, notes

    def apply_policy(self, name: str, spec: dict[str, Any]) -> None:
        self.kube.apply(path(names.POLICY_PLURAL, name=name, api=POLICY_API), {
            "apiVersion": names.API_VERSION, "kind": names.POLICY_KIND,
            "metadata": {"name": name}, "spec": spec})

    def _wait_webhook_called(self) -> None:
        def called() -> bool:
            with contextlib.suppress(ApiError):
                self.kube.create(path("pods", "chaos"), {
                    "metadata": {"generateName": "probe-"},
                    "spec": {"containers": [{"name": "c", "image": "p"}]}}, dry_run=True)
            return self.webhook_value("compactor_admission_requests_total") > 0
        wait_for("the API server to call the webhook", called, interval=0.3)

    def _all_running(self) -> bool:
        want = self.config.churned * self.config.low + sum(self.fixed.values())
        pods = [p for ns in ("chaos", "hook", "bulk", "loop")
                for p in self.kube.items(path("pods", ns))]
        return sum(1 for p in pods if p["status"].get("phase") == "Running"
                   and not p["metadata"].get("deletionTimestamp")) >= want

    def _loop_suppressed(self) -> bool:
        return self.loop_state()[0]

    # --- handles -----------------------------------------------------------------

    def add_webhook(self, name: str) -> None:
        proc, port = self.stack.start_webhook_replica(
            server=self.webhook_api.url,
            extra_env={"COMPACTOR_WEBHOOK_CACHE_SIZE": str(self.config.webhook_cache_size),
                       "COMPACTOR_WEBHOOK_LOG_LEVEL": self.config.log_level})
        self.webhooks[name] = (proc, port)
        self.balancer.backends = [p for _, p in self.webhooks.values()]

    def kill_webhook(self, name: str) -> None:
        self.webhooks[name][0].kill()

    def restart_webhook(self, name: str) -> None:
        proc, port = self.webhooks[name]
        proc.start()
        wait_webhook_ready(proc, port)

    def add_controller(self, identity: str) -> None:
        self.controllers[identity] = self.stack.start_controller_replica(
            identity, server=self.controller_api.url,
            extra_env={"COMPACTOR_LOG_LEVEL": self.config.log_level.upper()})

    def _holder(self) -> str:
        try:
            lease = self.kube.get(path("leases", names.INSTALL_NAMESPACE, "compactor-controller"))
        except ApiError:
            return ""
        return str(lease["spec"].get("holderIdentity") or "")

    def leader(self) -> str:
        return wait_for("a controller leading", lambda: self._holder() or None, timeout=60)

    def kill_controller(self, identity: str) -> float:
        self.controllers[identity].process.kill()
        return time.time()

    def restart_controller(self, identity: str) -> None:
        replica = self.controllers[identity]
        replica.process.start()
        replica.wait_ready()

    @property
    def grace(self) -> float:
        """The controllers' intent grace (the stack's default: past the webhook's cache)."""
        return self.stack.webhook_cache_ttl + 1

    def controller_value(self, name: str, match: dict[str, str] | None = None) -> float:
        """``name`` summed over the running controllers (only the leader plans)."""
        total = 0.0
        for replica in self.controllers.values():
            if replica.process.running():
                with contextlib.suppress(httpx.HTTPError):
                    text = httpx.get(f"http://127.0.0.1:{replica.metrics_port}/metrics",
                                     timeout=5).text
                    total += scrape.value(text, name, match)
        return total

    def webhook_value(self, name: str, match: dict[str, str] | None = None) -> float:
        total = 0.0
        for proc, port in self.webhooks.values():
            if proc.running():
                with contextlib.suppress(httpx.HTTPError):
                    text = httpx.get(f"https://127.0.0.1:{port}/metrics", verify=False,
                                     timeout=5).text
                    total += scrape.value(text, name, match)
        return total

    def loop_state(self) -> tuple[bool, str, int]:
        """The looping workload's suppression: (suppressed, until when, observations)."""
        deploy = self.kube.get(path("deployments", "loop", "looper"))["metadata"]
        state = ConvergenceState.parse(deploy.get("annotations") or {})
        suppressed = (deploy.get("labels") or {}).get(names.SUPPRESSED_LABEL) == "true"
        until = state.suppressed_until.isoformat() if state.suppressed_until else ""
        return suppressed, until, len(state.observations)

    def noncompliant(self, namespaces: dict[str, bool]) -> list[str]:
        """Live Pods (namespace/name) of these namespaces' managed Deployments not (yet)
        admitted with their workload's intent; a namespace whose Deployments carry no intent
        yet counts as itself. The scheduler is judged (``namespaces``' True) only on the nodes
        a policy's plan frees: the runtime hook replaces no Pod elsewhere, which keeps the
        scheduler it has, labelled in place."""
        out = []
        freeable = self._freeable() if any(namespaces.values()) else set()
        for ns, scheduler in namespaces.items():
            intents = {}
            for d in self.kube.items(path("deployments", ns)):
                raw = (d["metadata"].get("annotations") or {}).get(names.INTENT_ANNOTATION)
                parsed = parse_intent(raw or "")
                if parsed.intent is not None:
                    intents[d["metadata"]["name"]] = parsed.intent
            if not intents:
                out.append(f"{ns} (no intent yet)")
                continue
            for p in self.kube.items(path("pods", ns)):
                app = (p["metadata"].get("labels") or {}).get("app", "")
                if p["metadata"].get("deletionTimestamp") or app not in intents or \
                        p["status"].get("phase") in ("Succeeded", "Failed"):
                    continue
                judged = scheduler and p["spec"].get("nodeName") in freeable
                if not compliant(p, intents[app], judged):
                    out.append(f"{ns}/{p['metadata']['name']}")
        return out

    def _freeable(self) -> set[str]:
        """The nodes the policies' plans free, as their status says."""
        return {n for policy in self.kube.items(path(names.POLICY_PLURAL, api=POLICY_API))
                for n in ((policy.get("status") or {}).get("plan") or {}).get(
                    "freeableNodes", ())}

    def suppressed(self, namespaces: dict[str, bool]) -> set[str]:
        """The namespaces' workloads loop detection has suppressed right now."""
        return {f"{ns}/{d['metadata']['name']}" for ns in namespaces
                for d in self.kube.items(path("deployments", ns),
                                         f"{names.SUPPRESSED_LABEL}=true")}

    def _strength(self, namespaces: dict[str, bool]) -> str:
        """Each Deployment's ready/asked replicas, to tell why a run did not converge."""
        return ", ".join(
            f"{d['metadata']['name']} {d['status'].get('readyReplicas', 0)}/"
            f"{d['spec']['replicas']}" for ns in namespaces
            for d in self.kube.items(path("deployments", ns)))

    def secrets_to_find(self) -> dict[str, str]:
        """The values planted in the run's Pods, the accounts' tokens and each line of the
        webhook's private key: none may appear in a log."""
        found = dict(self.config.secrets)
        for kubeconfig in self.dir.glob("*.kubeconfig"):
            text = kubeconfig.read_text()
            if "token:" in text:
                found[f"token in {kubeconfig.name}"] = text.split("token:", 1)[1].split()[0]
        lines = [line for line in (self.dir / "webhook.key").read_text().splitlines()
                 if line and "-----" not in line]
        for i, line in enumerate(lines):
            found[f"webhook TLS key, line {i + 1}"] = line
        return found

    def service_logs(self) -> dict[str, str]:
        """Every webhook and controller log of the run (restarts append to the same file)."""
        return {p.name: p.read_text(errors="replace") for p in self.dir.glob("*.log")
                if p.name.startswith(("webhook", "controller"))}

    # --- measurement ---------------------------------------------------------------

    def _apiserver_metrics(self) -> str:
        try:
            return self.kube.raw("/metrics").text
        except httpx.HTTPError:
            return ""

    @contextlib.contextmanager
    def window(self, fault: str, converge: dict[str, bool] | None = None) -> Iterator[Window]:
        w = Window(fault, converge if converge is not None else {"chaos": True})
        w.metrics_before = self._apiserver_metrics()
        w.loop_before = self.loop_state()
        w.webhook_failed_open_before = self.webhook_value(FAILED_OPEN)
        w.suppressed_before = self.suppressed(w.converge)
        yield w
        if w.recovered_at is None:
            w.recovered()
        self.reports.append(self._measure(w))

    def _converged_after(self, w: Window) -> float | None:
        assert w.recovered_at is not None
        deadline = time.monotonic() + self.config.converge_timeout
        left: list[str] = []
        suppressed: set[str] = set()
        already = w.suppressed_before
        try:
            converged: float | None = None
            while time.monotonic() < deadline:
                with contextlib.suppress(ApiError, httpx.HTTPError):
                    suppressed |= self.suppressed(w.converge)
                    left = self.noncompliant(w.converge)
                    if left:
                        converged = None
                    elif converged is None:
                        converged = time.time()
                    if converged is not None and time.time() >= w.recovered_at + OBSERVE_AFTER:
                        return max(0.0, converged - w.recovered_at)
                time.sleep(0.5)
        finally:
            if suppressed - already:
                w.note += (("; " if w.note else "") + "suppressed on the way: "
                           + ", ".join(sorted(suppressed - already)))
        w.note += (("; " if w.note else "") + f"not converged: {len(left)} Pods left "
                   f"({', '.join(left[:4])}), replicas ready/asked "
                   f"{self._strength(w.converge)}")
        dump = {ns: {"deployments": self.kube.items(path("deployments", ns)),
                     "pods": self.kube.items(path("pods", ns))} for ns in w.converge}
        (self.dir / f"not-converged-{len(self.reports)}.json").write_bytes(orjson.dumps(dump))
        return None

    def _measure(self, w: Window) -> FaultReport:
        converge = self._converged_after(w)
        time.sleep(2)  # the audit log and the metrics catch up
        ended = datetime.datetime.now(datetime.UTC)
        events = self.audit.between(w.started, ended)
        creations = pod_creations(events, ("chaos", "hook", "bulk", "loop"))
        granted = evictions(events)
        metrics = self._apiserver_metrics()
        hook = [e for e in granted if e.user == CONTROLLER_USER]
        assert self.timeline is not None and self.churn is not None
        assert self.descheduler is not None and self.lease is not None
        churn, fixed, timeline = self.churn, self.fixed, self.timeline

        def desired(workload: str, at: float) -> int:
            return fixed.get(workload) or churn.desired(workload, at)

        def workload_of(ns: str, name: str) -> str | None:
            app = timeline.pod_app(ns, name)
            return f"{ns}/{app}" if app else None
        start_s, end_s = w.started.timestamp(), ended.timestamp()
        runs = [r for r in self.descheduler.runs if start_s <= r.started <= end_s]
        match = {"name": f"{LOCAL_WEBHOOK}.pods.compactor.dev"}
        hist = scrape.delta(
            scrape.histogram(metrics, "apiserver_admission_webhook_admission_duration_seconds",
                             match),
            scrape.histogram(w.metrics_before,
                             "apiserver_admission_webhook_admission_duration_seconds", match))
        fail_open = scrape.value(metrics, "apiserver_admission_webhook_fail_open_count", match)
        before_open = scrape.value(w.metrics_before,
                                   "apiserver_admission_webhook_fail_open_count", match)
        loop_after = self.loop_state()
        lost = int(w.loop_before[0] and (not loop_after[0] or loop_after[1] != w.loop_before[1])
                   or loop_after[2] < w.loop_before[2])
        taken = takeover(self.lease.holders, w.killed[1], w.killed[0]) if w.killed else None
        opened = self.webhook_value(FAILED_OPEN)
        opened = opened - w.webhook_failed_open_before if opened >= \
            w.webhook_failed_open_before else opened  # a replica restarted: counted anew
        assert self.restarter is not None
        restarts = [n for t, n in self.restarter.restarts if start_s <= t <= end_s]
        if restarts:
            w.note += (("; " if w.note else "") + f"{restarts[0]} exited and was restarted "
                       f"{len(restarts)}x (it lost its Lease)")
        return FaultReport(
            fault=w.fault, pods_created=sum(1 for e in creations if e.ok),
            creations_failed=sum(1 for e in creations if not e.ok),
            failed_window_s=failed_window(creations),
            failed_open=int(fail_open - before_open if fail_open >= before_open else fail_open),
            webhook_failed_open=int(opened),
            admission_p99_ms=p99_ms(scrape.quantile(hist, 0.99)), converge_s=converge,
            duplicate_evictions=duplicate_evictions(granted),
            evictions_over_limits=over_limits(runs, LIMITS) + hook_overlaps(
                timeline.snapshot(), hook, desired, workload_of),
            suppression_lost=lost, takeover_s=taken, lease_s=LEASE_SECONDS,
            stranded=w.stranded,
            webhook_rss_mib=max((peak_rss_mib(p.pid) for p, _ in self.webhooks.values()
                                 if p.running()), default=0.0),
            controller_rss_mib=max((peak_rss_mib(r.process.pid)
                                    for r in self.controllers.values()
                                    if r.process.running()), default=0.0),
            note=w.note)
