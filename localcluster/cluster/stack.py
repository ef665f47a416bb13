"""Compactor's own parts run against the local cluster the way they run in one: RBAC from
deploy/, ServiceAccount tokens, the webhook and controller as processes, the compaction
scheduler from the controller's ConfigMap, and descheduler runs from its per-policy ConfigMap.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from compaction import kinds, names
from localcluster.cluster import scrape
from localcluster.cluster.control_plane import MANUAL_STATUS, ROOT, Cluster
from localcluster.cluster.kube import Kube, path, wait_for
from localcluster.cluster.process import Process, free_port

WEBHOOK_NAMESPACE_LABEL = "compactor-test-webhook"


def apply_file(kube: Kube, file: Path) -> list[dict[str, Any]]:
    """Server-side apply of every object in a YAML file (the kinds our manifests use)."""
    out = []
    for obj in yaml.safe_load_all(file.read_text()):
        if not obj:
            continue
        url = kinds.kind(obj["kind"]).path(obj["metadata"].get("namespace"),
                                           obj["metadata"]["name"])
        out.append(kube.apply(url, obj))
    return out


def service_account_token(kube: Kube, namespace: str, name: str) -> str:
    resp = kube.create(path("serviceaccounts", namespace, name, sub="token"), {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600}})
    return str(resp["status"]["token"])


def token_kubeconfig(cluster: Cluster, token: str, file: Path, server: str | None = None
                     ) -> Path:
    """A kubeconfig with ``token``, for the API server or ``server`` (a relay in front of it,
    whose address its certificate also covers)."""
    file.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "local", "cluster": {
            "server": server or cluster.server,
            "certificate-authority": str(cluster.pki / "ca.crt")}}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "local", "user": "sa"}}],
    }))
    return file


def local_scheduler_config(config: dict[str, Any], kubeconfig: Path | str,
                           extender_url: str | None = None) -> dict[str, Any]:
    """A rendered KubeSchedulerConfiguration for a process here: the given credentials, and
    its extender at ``extender_url`` (a process of ``start_extender``; in a Pod it is the
    container beside the scheduler, at the same loopback address); none without one."""
    out = {**config, "clientConnection": {"kubeconfig": str(kubeconfig)}}
    out["extenders"] = [{**e, "urlPrefix": extender_url} for e in config.get("extenders") or ()
                        ] if extender_url else []
    return out


class RunningExtender:
    def __init__(self, process: Process, port: int) -> None:
        self.process, self.port = process, port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def metric(self, name: str, **labels: str) -> float:
        return scrape.sample(httpx.get(f"{self.url}/metrics", timeout=5).text, name, labels)


def start_extender(cluster: Cluster, kubeconfig: Path, workdir: Path) -> RunningExtender:
    """``compactor-extender`` as a process, with the credentials of ``kubeconfig`` (the
    scheduler's account, as in its Pod); returns once it answers /healthz."""
    port = free_port()
    env = {**os.environ, "COMPACTOR_EXTENDER_PORT": str(port),
           "COMPACTOR_EXTENDER_KUBECONFIG": str(kubeconfig)}
    proc = Process(f"extender-{port}", [sys.executable, "-m", "webhook.extender_server"],
                   workdir / f"extender-{port}.log", env=env)
    proc.start()
    cluster.processes.append(proc)
    try:
        proc.wait_healthy(lambda: httpx.get(f"http://127.0.0.1:{port}/healthz",
                                            timeout=1).status_code == 200, 30)
    except BaseException:
        proc.stop()
        cluster.processes.remove(proc)
        raise
    return RunningExtender(proc, port)


def webhook_metric(hook: RunningWebhook, name: str, **labels: str) -> float:
    """The webhook's series of ``name`` with exactly ``labels``; 0 while absent."""
    return scrape.sample(httpx.get(f"{hook.url}/metrics", verify=False).text, name, labels)


def _wait_until_called(kube: Kube, hook: RunningWebhook, selector_value: str) -> None:
    """The API server learns of new webhook configurations asynchronously; probe with bare
    Pods (which the webhook skips) until it reports being called."""
    ns = f"probe-{uuid.uuid4().hex[:6]}"
    kube.ensure_namespace(ns, {WEBHOOK_NAMESPACE_LABEL: selector_value},
                          default_service_account=True)

    def called() -> bool:
        kube.create(path("pods", ns), {"metadata": {"generateName": "probe-"},
                                       "spec": {"containers": [{"name": "c", "image": "p"}]}})
        return webhook_metric(hook, "compactor_admission_requests_total",
                              outcome="skipped") > 0
    try:
        wait_for("the API server to call the webhook", called, interval=0.3)
    finally:
        kube.delete(path("namespaces", name=ns))


class RunningWebhook:
    def __init__(self, process: Process, port: int, config_name: str) -> None:
        self.process, self.port, self.config_name = process, port, config_name

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"


def start_webhook_process(cluster: Cluster, kube: Kube, workdir: Path, cert: Path, key: Path,
                          extra_env: dict[str, str] | None = None, port: int | None = None,
                          server: str | None = None) -> tuple[Process, int]:
    """``python -m webhook`` as its own process, with the compactor-webhook ServiceAccount's
    token (so RBAC is real); returns once it answers /readyz. ``server``: reach the API
    server through this address instead."""
    kube.ensure_namespace(names.INSTALL_NAMESPACE)
    apply_file(kube, ROOT / "deploy" / "rbac" / "webhook.yaml")
    token = service_account_token(kube, names.INSTALL_NAMESPACE, "compactor-webhook")
    kubeconfig = token_kubeconfig(cluster, token, workdir / "webhook.kubeconfig", server)
    port = port or free_port()
    env = {**os.environ, "COMPACTOR_WEBHOOK_HOST": "127.0.0.1",
           "COMPACTOR_WEBHOOK_PORT": str(port), "COMPACTOR_WEBHOOK_CERT_FILE": str(cert),
           "COMPACTOR_WEBHOOK_KEY_FILE": str(key), "COMPACTOR_WEBHOOK_KUBECONFIG": str(kubeconfig),
           **(extra_env or {})}
    proc = Process(f"webhook-{uuid.uuid4().hex[:6]}", [sys.executable, "-m", "webhook"],
                   workdir / f"webhook-{port}.log", env=env)
    proc.start()
    cluster.processes.append(proc)
    try:
        wait_webhook_ready(proc, port)
    except BaseException:
        proc.stop()
        cluster.processes.remove(proc)
        raise
    return proc, port


def wait_webhook_ready(proc: Process, port: int, timeout: float = 30) -> None:
    # Any certificate will do for the health check; the API server judges the real one.
    proc.wait_healthy(lambda: httpx.get(f"https://127.0.0.1:{port}/readyz", verify=False,
                                        timeout=1).status_code == 200, timeout)


def webhook_configuration(name: str, port: int, selector_value: str,
                          ca_bundle: bytes | None, failure_policy: str = "Ignore"
                          ) -> dict[str, Any]:
    client: dict[str, Any] = {"url": f"https://127.0.0.1:{port}/mutate"}
    if ca_bundle is not None:
        client["caBundle"] = base64.b64encode(ca_bundle).decode()
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": f"{name}.pods.compactor.dev",
            "clientConfig": client,
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["pods"], "scope": "Namespaced"}],
            "namespaceSelector": {"matchLabels": {WEBHOOK_NAMESPACE_LABEL: selector_value}},
            "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": failure_policy, "timeoutSeconds": 5,
            "reinvocationPolicy": "IfNeeded",
        }],
    }


@contextmanager
def run_webhook(cluster: Cluster, kube: Kube, workdir: Path, selector_value: str = "on",
                extra_env: dict[str, str] | None = None) -> Iterator[RunningWebhook]:
    """The webhook process with a certificate from the test CA, registered for namespaces
    labelled ``compactor-test-webhook=<selector_value>``."""
    cert, key = cluster.ca.serving(["localhost"], ["127.0.0.1"]).write(workdir, "webhook")
    proc, port = start_webhook_process(cluster, kube, workdir, cert, key, extra_env)
    name = f"compactor-test-{uuid.uuid4().hex[:6]}"
    try:
        kube.create(path("mutatingwebhookconfigurations"),
                    webhook_configuration(name, port, selector_value, cluster.ca.cert_pem))
        hook = RunningWebhook(proc, port, name)
        _wait_until_called(kube, hook, selector_value)
        yield hook
    finally:
        kube.delete(path("mutatingwebhookconfigurations", name=name))
        proc.stop()
        cluster.processes.remove(proc)


LOCAL_WEBHOOK = "compactor-webhook-local"


@dataclass(frozen=True)
class RunningController:
    process: Process
    metrics_port: int
    identity: str

    def wait_ready(self) -> None:
        self.process.wait_healthy(lambda: httpx.get(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=1).status_code == 200, 30)


# The compaction scheduler's health, judged on the local cluster's time scale (kwok runs its
# Deployment's Pod within a second or two): down after 10 s, routed to again after 5 s, Pods
# Pending on it replaced after 20 s.
SCHEDULER_DOWN_AFTER, SCHEDULER_RECOVERY, STRANDED_AFTER = 10.0, 5.0, 20.0


def stranded_bound(grace: float) -> float:
    """The longest a Pod may wait on a missing compaction scheduler in the local stack: its
    own bound, or the outage's detection plus the intent grace (``grace``), whichever is
    later, plus a few passes."""
    return max(STRANDED_AFTER, SCHEDULER_DOWN_AFTER + grace) + 15.0


@dataclass(frozen=True)
class DeschedulerRun:
    evicted: list[tuple[str, str]]  # (namespace/name, node) per eviction
    log: str


def evicted_pods(log: str) -> list[tuple[str, str]]:
    """(namespace/name, node) of each eviction a descheduler's log (at --v=3) reports."""
    evicted = []
    for line in log.splitlines():
        if '"Evicted pod"' in line and 'pod="' in line:
            pod = line.split('pod="', 1)[1].split('"', 1)[0]
            node = line.split('node="', 1)[1].split('"', 1)[0] if 'node="' in line else ""
            evicted.append((pod, node))
    return evicted


class CompactorStack:
    """Webhook, controller and compaction scheduler as processes, each with its own
    ServiceAccount token and the RBAC of deploy/; descheduler runs on demand."""

    def __init__(self, cluster: Cluster, kube: Kube, workdir: Path) -> None:
        self.cluster, self.kube, self.dir = cluster, kube, workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.metrics_port = 0
        self.webhook_cache_ttl = 30.0
        self.webhook: RunningWebhook | None = None

    def install(self) -> None:
        """Every CRD of deploy/crds (the controller's pass reads and creates each kind) and
        the components' RBAC."""
        self.kube.ensure_namespace(names.INSTALL_NAMESPACE)
        plurals = set()
        for file in sorted((ROOT / "deploy" / "crds").glob("*.yaml")):
            crd = yaml.safe_load(file.read_text())
            self.kube.apply(path("customresourcedefinitions", name=crd["metadata"]["name"]), crd)
            plurals.add(crd["spec"]["names"]["plural"])
        wait_for("every compactor.dev kind served", lambda: plurals <= {
            r["name"] for r in self.kube.get(f"/apis/{names.API_VERSION}").get("resources")
            or []})
        for name in ("webhook", "controller", "scheduler", "descheduler"):
            apply_file(self.kube, ROOT / "deploy" / "rbac" / f"{name}.yaml")

    def _kubeconfig(self, account: str) -> Path:
        token = service_account_token(self.kube, names.INSTALL_NAMESPACE, account)
        return token_kubeconfig(self.cluster, token, self.dir / f"{account}.kubeconfig")

    def start_webhook(self, cache_ttl: float = 1.0) -> int:
        """Short owner-cache lifetimes by default, so that the controller's intent grace (which
        must outlast them) can be short too and a local run converges in seconds."""
        proc, port = self.start_webhook_replica(cache_ttl)
        self.register_webhook(port)
        self.webhook = RunningWebhook(proc, port, LOCAL_WEBHOOK)
        _wait_until_called(self.kube, self.webhook, "")
        return port

    def start_webhook_replica(self, cache_ttl: float = 1.0, server: str | None = None,
                              extra_env: dict[str, str] | None = None) -> tuple[Process, int]:
        """One more webhook process, not registered (``register_webhook`` points the API
        server at it, or at a balancer in front of several)."""
        cert, key = self.cluster.ca.serving(["localhost"], ["127.0.0.1"]).write(
            self.dir, "webhook")
        self.webhook_cache_ttl = cache_ttl
        ttl = str(cache_ttl)
        return start_webhook_process(self.cluster, self.kube, self.dir, cert, key, {
            "COMPACTOR_WEBHOOK_CACHE_TTL_SECONDS": ttl,
            "COMPACTOR_WEBHOOK_NEGATIVE_TTL_SECONDS": ttl, **(extra_env or {})},
            server=server)

    def register_webhook(self, port: int, failure_policy: str = "Ignore",
                         excluded: dict[str, str] | None = None, timeout_seconds: int = 5
                         ) -> None:
        """The install's webhook configuration at ``https://127.0.0.1:<port>``, with its own
        selector (every namespace but kube-system, compactor-system and opted-out ones) and
        namespaces carrying one of the ``excluded`` labels left out too."""
        config = webhook_configuration(LOCAL_WEBHOOK, port, "", self.cluster.ca.cert_pem,
                                       failure_policy)
        config["webhooks"][0]["timeoutSeconds"] = timeout_seconds
        config["webhooks"][0]["namespaceSelector"] = {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
             "values": ["kube-system", names.INSTALL_NAMESPACE]},
            {"key": names.IGNORE_LABEL, "operator": "NotIn", "values": ["true"]},
            *({"key": k, "operator": "NotIn", "values": [v]}
              for k, v in (excluded or {}).items())]}
        self.kube.apply(path("mutatingwebhookconfigurations", name=LOCAL_WEBHOOK), config)

    def start_controller(self, resync_seconds: float = 2.0,
                         grace_seconds: float | None = None,
                         extra_env: dict[str, str] | None = None) -> None:
        """``grace_seconds`` defaults to a second past the webhook's cache lifetime; a shorter
        one would evict Pods the webhook judged on a stale owner and report loops that are not."""
        replica = self.start_controller_replica("compactor-controller-local", resync_seconds,
                                                grace_seconds, log="controller.log",
                                                extra_env=extra_env,
                                                name="compactor-controller")
        self.metrics_port = replica.metrics_port

    def start_controller_replica(self, identity: str, resync_seconds: float = 2.0,
                                 grace_seconds: float | None = None, server: str | None = None,
                                 log: str | None = None,
                                 extra_env: dict[str, str] | None = None,
                                 name: str | None = None) -> RunningController:
        """One controller process under ``identity`` (its Lease holder name); several make
        one leader and standbys, as the Deployment's replicas do."""
        if grace_seconds is None:
            grace_seconds = self.webhook_cache_ttl + 1
        if grace_seconds <= self.webhook_cache_ttl:
            raise ValueError(f"intent grace {grace_seconds} s must outlast the webhook's owner "
                             f"cache ({self.webhook_cache_ttl} s)")
        port = free_port()
        token = service_account_token(self.kube, names.INSTALL_NAMESPACE,
                                      "compactor-controller")
        kubeconfig = token_kubeconfig(self.cluster, token, self.dir / f"{identity}.kubeconfig",
                                      server)
        env = {**os.environ,
               "COMPACTOR_CONTROLLER_KUBECONFIG": str(kubeconfig),
               "COMPACTOR_CONTROLLER_RESYNC_SECONDS": str(resync_seconds),
               "COMPACTOR_CONTROLLER_INTENT_GRACE_SECONDS": str(grace_seconds),
               "COMPACTOR_CONTROLLER_METRICS_PORT": str(port),
               "COMPACTOR_CONTROLLER_METRICS_ADDRESS": "127.0.0.1",
               "COMPACTOR_CERTS_MODE": "off", "POD_NAME": identity,
               # Names the image of the extender's container, which kwok only pretends to
               # run: start_scheduler runs the extender beside the scheduler as a process.
               "COMPACTOR_EXTENDER_IMAGE": "compactor:0.1.0",
               "COMPACTOR_CONTROLLER_SCHEDULER_DOWN_AFTER_SECONDS": str(SCHEDULER_DOWN_AFTER),
               "COMPACTOR_CONTROLLER_SCHEDULER_RECOVERY_SECONDS": str(SCHEDULER_RECOVERY),
               "COMPACTOR_CONTROLLER_STRANDED_AFTER_SECONDS": str(STRANDED_AFTER),
               **(extra_env or {})}
        proc = Process(name or identity, [sys.executable, "-m", "controller"],
                       self.dir / (log or f"{identity}.log"), env=env)
        proc.start()
        self.cluster.processes.append(proc)
        replica = RunningController(proc, port, identity)
        replica.wait_ready()
        return replica

    def controller_metric(self, name: str, **labels: str) -> float:
        """The controller's series of ``name`` with exactly ``labels``; 0 while absent."""
        text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text
        return scrape.sample(text, name, labels)

    def start_scheduler(self) -> Process:
        """kube-scheduler with the configuration the controller rendered into its ConfigMap,
        and its extender when the configuration names one (the processes stand for the
        Deployment's Pod, which kwok only pretends to run)."""
        cm = wait_for("the scheduler ConfigMap", lambda: self.kube.get(
            path("configmaps", names.INSTALL_NAMESPACE, names.SCHEDULER_CONFIGMAP)), timeout=60)
        kubeconfig = self._kubeconfig(names.MANAGED_SCHEDULER)
        config = yaml.safe_load(cm["data"]["config.yaml"])
        extender = start_extender(self.cluster, kubeconfig, self.dir) \
            if config.get("extenders") else None
        config = local_scheduler_config(config, kubeconfig, extender.url if extender else None)
        file = self.dir / f"{names.MANAGED_SCHEDULER}.yaml"
        file.write_text(yaml.safe_dump(config))
        return self.cluster.start_scheduler(name=names.MANAGED_SCHEDULER, config=file)

    def scheduler_pods_unready(self, unready: bool) -> None:
        """The scheduler Deployment's Pods as a kubelet reports ones whose image cannot be
        pulled (``unready``: kwok leaves them so), or deleted so that their ReplicaSet makes
        new ones, which kwok runs. kwok only pretends to run them; the scheduler itself is the
        process of ``start_scheduler``."""
        ns = names.INSTALL_NAMESPACE
        for pod in self.kube.items(path("pods", ns), "app.kubernetes.io/component=scheduler"):
            name = pod["metadata"]["name"]
            if not unready:
                self.kube.delete(path("pods", ns, name))
                continue
            self.kube.patch(path("pods", ns, name), {"metadata": {
                "annotations": {MANUAL_STATUS: "manual"}}})
            self.kube.patch(path("pods", ns, name, sub="status"), {"status": {
                "conditions": [{"type": "Ready", "status": "False"},
                               {"type": "ContainersReady", "status": "False"}],
                "containerStatuses": [{
                    "name": c["name"], "image": c["image"], "imageID": "", "ready": False,
                    "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff"}}}
                    for c in pod["spec"]["containers"]]}})

    def run_descheduler(self, policy: str) -> DeschedulerRun:
        """One run, as the CronJob's Job runs it: the rendered policy, the descheduler account."""
        cm = self.kube.get(path("configmaps", names.INSTALL_NAMESPACE,
                                names.descheduler_name(policy)))
        file = self.dir / f"descheduler-{policy}.yaml"
        file.write_text(cm["data"]["policy.yaml"])
        out = subprocess.run(
            [str(self.cluster.bin / "descheduler"),
             f"--kubeconfig={self._kubeconfig('compactor-descheduler')}",
             f"--policy-config-file={file}", "--v=3", "--bind-address=127.0.0.1",
             f"--secure-port={free_port()}", f"--cert-dir={self.dir / 'descheduler-certs'}"],
            capture_output=True, text=True, timeout=300, check=False)
        log = out.stdout + out.stderr
        with (self.dir / "descheduler.log").open("a") as f:
            f.write(log)
        if out.returncode != 0:
            raise RuntimeError(f"descheduler failed:\n{log[-3000:]}")
        return DeschedulerRun(evicted_pods(log), log)


def start_local(cluster: Cluster, workdir: Path, resync_seconds: float = 2.0,
                webhook_cache_ttl: float = 1.0, grace_seconds: float | None = None
                ) -> tuple[Kube, CompactorStack]:
    """The controller manager, the default scheduler, kwok, then Compactor's webhook and
    controller: everything but the compaction scheduler, which waits for its ConfigMap."""
    cluster.start_workers()
    kube = cluster.client()
    stack = CompactorStack(cluster, kube, workdir)
    stack.install()
    stack.start_webhook(webhook_cache_ttl)
    stack.start_controller(resync_seconds, grace_seconds)
    return kube, stack
