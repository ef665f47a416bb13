"""`make bench-peers` (not in CI): Compactor beside Kyverno, doing the same job on one API server.

The job: a Pod of a Deployment's ReplicaSet is created; its admission reads the Deployment's
intent annotation and sets the policy and workload-kind labels, the intent annotation and
``spec.schedulerName``. Compactor's webhook does it from its watch feed; Kyverno (built from
its Go module by tools/build-kyverno.sh, run as a local process the way its developer guide
runs it, ``--serverIP``) with a ClusterPolicy whose two ``apiCall`` contexts read the
ReplicaSet and then the Deployment, the closest equivalent a Kyverno policy has.

Every webhook configuration points at a loopback URL: Compactor's is registered here; so is
Kyverno's resource webhook (its own configuration replaced, with ``--autoUpdateWebhooks=false``
so that Kyverno never rewrites it) and Kyverno writes its others with ``--serverIP``, a URL
too; the run checks every configuration in the cluster before it reports.

The same load for each variant, interleaved (none, Compactor, Kyverno, and again): 16
parallel creators through the API server; reported per variant, as medians over the
repeats, are the API server's webhook latency p50/p99, Pod creations per second, the
webhook's CPU seconds per 1,000 admissions and its peak RSS, then the ratios.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from compaction import names
from compaction.intent import Intent
from loadtest import creators
from localcluster import Cluster, ClusterConfig, Kube
from localcluster.cluster import scrape
from localcluster.cluster.control_plane import built
from localcluster.cluster.kube import path, wait_for
from localcluster.cluster.process import Process, free_port
from localcluster.cluster.procstat import cpu_seconds, peak_rss_mib
from localcluster.cluster.stack import (
    WEBHOOK_NAMESPACE_LABEL,
    start_webhook_process,
    webhook_configuration,
)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "loadtest" / "results"
NAMESPACE = "peers"
INTENT = Intent("bench", {names.POLICY_LABEL: "bench",
                          names.WORKLOAD_KIND_LABEL: "Deployment"}, names.MANAGED_SCHEDULER)
KYVERNO_NS = "kyverno"
KYVERNO_CA, KYVERNO_TLS = "kyverno-svc.kyverno.svc.kyverno-tls-ca", \
    "kyverno-svc.kyverno.svc.kyverno-tls-pair"
KYVERNO_MWC = "kyverno-resource-mutating-webhook-cfg"
KYVERNO_VWC = "kyverno-resource-validating-webhook-cfg"
KYVERNO_WEBHOOK = "mutate.kyverno.svc-fail"
COMPACTOR_CONFIG = "compactor-peers"
COMPACTOR_WEBHOOK = f"{COMPACTOR_CONFIG}.pods.compactor.dev"
OFF = "off"  # a namespaceSelector value no namespace carries
ADMISSION_API = "apis/admissionregistration.k8s.io/v1"


def kyverno_policy() -> dict[str, Any]:
    """The job as a Kyverno ClusterPolicy: the ReplicaSet's owner, its intent, the patch."""
    owner = "request.object.metadata.ownerReferences[?controller].name | [0]"
    return {
        "apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy",
        "metadata": {"name": "compactor-intent"},
        "spec": {"background": False, "rules": [{
            "name": "intent-of-the-workload",
            "match": {"any": [{"resources": {"kinds": ["Pod"], "operations": ["CREATE"]}}]},
            "context": [
                {"name": "deployment", "apiCall": {
                    "urlPath": "/apis/apps/v1/namespaces/{{request.namespace}}/replicasets/"
                               "{{" + owner + "}}",
                    "jmesPath": "metadata.ownerReferences[?controller].name | [0]"}},
                {"name": "annotation", "apiCall": {
                    "urlPath": "/apis/apps/v1/namespaces/{{request.namespace}}/deployments/"
                               "{{deployment}}",
                    "jmesPath": f'metadata.annotations."{names.INTENT_ANNOTATION}"'}},
                {"name": "intent", "variable": {"jmesPath": "parse_json(annotation)"}},
            ],
            "mutate": {"patchStrategicMerge": {
                "metadata": {
                    "labels": {
                        names.POLICY_LABEL: "{{ intent.policy }}",
                        names.WORKLOAD_KIND_LABEL:
                            '{{ intent.labels."' + names.WORKLOAD_KIND_LABEL + '" }}'},
                    "annotations": {names.INTENT_ANNOTATION: "{{ annotation }}"}},
                "spec": {"schedulerName": "{{ intent.schedulerName }}"}}},
        }]},
    }


@dataclass(frozen=True)
class Sample:
    variant: str
    creation: creators.Creation
    p50_ms: float
    p99_ms: float
    cpu_s: float  # the webhook process's CPU during the run


@dataclass(frozen=True)
class Summary:
    variant: str
    per_second: float
    p50_ms: float
    p99_ms: float
    cpu_per_1000: float
    peak_rss_mib: float
    failures: int
    runs: tuple[float, ...]  # Pods/s of each run


def summarize(variant: str, samples: list[Sample], peak_rss: float) -> Summary:
    """Medians over the repeats of one variant."""
    mine = [s for s in samples if s.variant == variant]
    return Summary(
        variant, statistics.median(s.creation.per_second for s in mine),
        statistics.median(s.p50_ms for s in mine), statistics.median(s.p99_ms for s in mine),
        statistics.median(1000 * s.cpu_s / s.creation.pods for s in mine), peak_rss,
        sum(s.creation.failures for s in mine), tuple(s.creation.per_second for s in mine))


def table(rows: list[Summary]) -> str:
    none = next(r for r in rows if r.variant == "none")
    head = ["webhook", "Pods/s", "× no webhook", "API server's webhook p50 / p99 ms",
            "CPU s per 1,000 admissions", "peak RSS MiB", "Pods/s per run"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        latency = "—" if r.variant == "none" else f"{r.p50_ms:.1f} / {r.p99_ms:.0f}"
        cpu = "—" if r.variant == "none" else f"{r.cpu_per_1000:.2f}"
        rss = "—" if r.variant == "none" else f"{r.peak_rss_mib:.0f}"
        lines.append("| " + " | ".join([
            r.variant, f"{r.per_second:.0f}", f"{r.per_second / none.per_second:.2f}",
            latency, cpu, rss, ", ".join(f"{x:.0f}" for x in r.runs)]) + " |")
    return "\n".join(lines)


def ratios(rows: list[Summary]) -> list[str]:
    by = {r.variant: r for r in rows}
    c, k = by["compactor"], by["kyverno"]
    return [f"Compactor / Kyverno: {c.per_second / k.per_second:.1f}× the Pods/s, "
            f"{k.p50_ms / c.p50_ms:.1f}× lower p50, {k.p99_ms / c.p99_ms:.1f}× lower p99, "
            f"{k.cpu_per_1000 / c.cpu_per_1000:.1f}× less CPU per admission, "
            f"{k.peak_rss_mib / c.peak_rss_mib:.1f}× less memory"]


# --- I/O ---------------------------------------------------------------------------------






def _kyverno_bin() -> Path:
    return built("build-kyverno.sh")


def _owners(kube: Kube) -> dict[str, Any]:
    """A Deployment with the intent and a ReplicaSet it owns (no controller manager runs, so
    both stay as made); returns the Pod every creator posts."""
    deployment = kube.create(path("deployments", NAMESPACE), {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "annotations": {names.INTENT_ANNOTATION: INTENT.render()}},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "pause"}]}}}})
    rs = kube.create(path("replicasets", NAMESPACE), {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-7d9f8c6b5", "ownerReferences": [{
            "apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
            "uid": deployment["metadata"]["uid"], "controller": True}]},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "pause"}]}}}})
    return {"metadata": {"generateName": "web-7d9f8c6b5-", "labels": {"app": "web"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": rs["metadata"]["name"],
                                              "uid": rs["metadata"]["uid"],
                                              "controller": True}]},
            "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "100m"}}}]}}


def _mutated(kube: Kube, pod: dict[str, Any]) -> bool:
    made = kube.create(path("pods", NAMESPACE), pod)
    return (made["metadata"].get("labels") or {}).get(names.POLICY_LABEL) == "bench" and \
        made["spec"].get("schedulerName") == names.MANAGED_SCHEDULER


class Kyverno:
    """Kyverno's admission controller as a local process (cluster-admin credentials: RBAC is
    not what is measured), its resource webhook registered here on a loopback URL."""

    def __init__(self, cluster: Cluster, kube: Kube, workdir: Path) -> None:
        self.cluster, self.kube, self.dir = cluster, kube, workdir
        self.port = free_port()

    def start(self) -> Process:
        binary = _kyverno_bin()
        crds = binary.parent / "crds" / "kyverno"
        for file in sorted(crds.glob("*.yaml")):
            crd = yaml.safe_load(file.read_text())
            self.kube.apply(path("customresourcedefinitions", name=crd["metadata"]["name"]),
                            crd)
        self.kube.ensure_namespace(KYVERNO_NS, default_service_account=True)
        wait_for("Kyverno's kinds served", lambda: self.kube.get(
            "/apis/kyverno.io/v1").get("resources"), timeout=60)
        # Kyverno's resource webhooks, ours before it starts: it creates its defaults (every
        # resource, failurePolicy Fail, its own Secrets and Leases included) only when none
        # exists, and with --autoUpdateWebhooks=false never changes one that does.
        self.ca_bundle = b""
        self.register(OFF)
        # The environment of Kyverno's own launch configuration for a local process.
        env = {**os.environ, "KYVERNO_NAMESPACE": KYVERNO_NS,
               "KYVERNO_SERVICEACCOUNT_NAME": "kyverno-admission-controller",
               "KYVERNO_DEPLOYMENT": "dummy", "KYVERNO_POD_NAME": "dummy",
               "INIT_CONFIG": "kyverno", "METRICS_CONFIG": "kyverno-metrics"}
        argv = [str(binary / "kyverno"), f"--kubeconfig={self.cluster.kubeconfig}",
                f"--serverIP=127.0.0.1:{self.port}", "--webhookServerHost=127.0.0.1",
                f"--webhookServerPort={self.port}", f"--caSecretName={KYVERNO_CA}",
                f"--tlsSecretName={KYVERNO_TLS}", "--autoUpdateWebhooks=false",
                "--admissionReports=false", "--enableReporting=",
                "--omitEvents=PolicyApplied,PolicySkipped",
                # The default 100 requests/s would cap the two apiCalls per admission.
                "--clientRateLimitQPS=2000", "--clientRateLimitBurst=4000",
                "--metricsHost=127.0.0.1", f"--metricsPort={free_port()}",
                f"--controllerRuntimeMetricsAddress=127.0.0.1:{free_port()}",
                "--loggingFormat=text", "--v=1"]
        proc = Process("kyverno", argv, self.dir / "kyverno.log", env=env)
        proc.start()
        self.cluster.processes.append(proc)
        ca = wait_for("Kyverno's CA secret", lambda: self.kube.get(
            path("secrets", KYVERNO_NS, KYVERNO_CA)), timeout=120)
        self.ca_bundle = base64.b64decode(ca["data"]["tls.crt"])
        wait_for("Kyverno's serving certificate", lambda: self.kube.get(
            path("secrets", KYVERNO_NS, KYVERNO_TLS)), timeout=120)
        # Its policy webhooks answer once its server has loaded that certificate.
        wait_for("Kyverno to take the policy", lambda: self.kube.apply(path(
            "clusterpolicies", name="compactor-intent", api="apis/kyverno.io/v1"),
            kyverno_policy()), timeout=120, interval=1)
        return proc

    def register(self, selector_value: str) -> None:
        """Kyverno's resource webhooks as this bench wants them: the mutating one for Pod
        CREATE in the namespaces labelled ``selector_value``, on a loopback URL; the
        validating one for nothing (no validate rule exists)."""
        url = f"https://127.0.0.1:{self.port}/mutate/fail"
        mwc = webhook_configuration(KYVERNO_MWC, self.port, selector_value, None,
                                    failure_policy="Fail")
        client: dict[str, str] = {"url": url}
        if self.ca_bundle:
            client["caBundle"] = base64.b64encode(self.ca_bundle).decode()
        mwc["webhooks"][0].update(name=KYVERNO_WEBHOOK, clientConfig=client, timeoutSeconds=10)
        self.kube.apply(path("mutatingwebhookconfigurations", name=KYVERNO_MWC), mwc)
        self.kube.apply(path("validatingwebhookconfigurations", name=KYVERNO_VWC,
                             api=ADMISSION_API), {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": KYVERNO_VWC},
            "webhooks": []})


def _only_loopback(kube: Kube) -> list[str]:
    """Every webhook of every configuration in the cluster that is not a loopback URL."""
    wrong = []
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        for config in kube.items(path(kind, api=ADMISSION_API)):
            for hook in config.get("webhooks") or []:
                url = (hook.get("clientConfig") or {}).get("url") or ""
                if not url.startswith("https://127.0.0.1:"):
                    wrong.append(f"{config['metadata']['name']}/{hook['name']}: "
                                 f"{hook.get('clientConfig')}")
    return wrong


def _label_namespace(kube: Kube, value: str) -> None:
    kube.patch(path("namespaces", name=NAMESPACE),
               {"metadata": {"labels": {WEBHOOK_NAMESPACE_LABEL: value}}})


def run(repeats: int, pods: int, parallel: int) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="compactor-bench-peers-"))
    RESULTS.mkdir(parents=True, exist_ok=True)
    with Cluster(ClusterConfig(workdir=workdir / "cluster")) as cluster:
        kube = cluster.client()
        kube.ensure_namespace(NAMESPACE, {WEBHOOK_NAMESPACE_LABEL: OFF},
                              default_service_account=True)
        pod = _owners(kube)
        print("starting Compactor's webhook and Kyverno ...", flush=True)
        cert, key = cluster.ca.serving(["localhost"], ["127.0.0.1"]).write(workdir, "webhook")
        hook, port = start_webhook_process(cluster, kube, workdir, cert, key)
        kube.create(path("mutatingwebhookconfigurations"), webhook_configuration(
            COMPACTOR_CONFIG, port, "compactor", cluster.ca.cert_pem, failure_policy="Fail"))
        kyverno = Kyverno(cluster, kube, workdir)
        kyverno_proc = kyverno.start()
        kyverno.register("kyverno")
        procs = {"compactor": hook, "kyverno": kyverno_proc}
        webhook_names = {"compactor": COMPACTOR_WEBHOOK, "kyverno": KYVERNO_WEBHOOK}
        samples: list[Sample] = []
        for _ in range(repeats):
            for variant in ("none", "compactor", "kyverno"):
                _label_namespace(kube, variant)
                if variant == "none":
                    wait_for("no webhook", lambda: not _mutated(kube, pod), timeout=60)
                else:
                    wait_for(f"{variant} mutating", lambda: _mutated(kube, pod), timeout=120,
                             interval=0.5)
                    for _ in range(50):  # warm: connections, caches
                        _mutated(kube, pod)
                proc = procs.get(variant)
                webhook = webhook_names.get(variant, "")
                before = creators.webhook_histogram(kube, webhook) if proc else []
                cpu0 = cpu_seconds(proc.pid or 0) if proc else 0.0
                made = creators.create_pods(cluster.credentials, NAMESPACE, pod, pods,
                                            parallel)
                cpu = cpu_seconds(proc.pid or 0) - cpu0 if proc else 0.0
                hist = scrape.delta(creators.webhook_histogram(kube, webhook), before) \
                    if proc else []
                samples.append(Sample(variant, made, 1000 * scrape.quantile(hist, 0.5),
                                      1000 * scrape.quantile(hist, 0.99), cpu))
                print(f"  {variant}: {made.per_second:.0f} Pods/s, {made.failures} failed, "
                      f"{made.mutated}/{made.pods} mutated", flush=True)
                if variant != "none" and made.mutated != made.pods:
                    print(f"  {variant} left {made.pods - made.mutated} Pods unmutated",
                          flush=True)
                creators.clear(kube, NAMESPACE)
                time.sleep(2)
        wrong = _only_loopback(kube)
        rows = [summarize(v, samples, peak_rss_mib(procs[v].pid or 0) if v in procs else 0.0)
                for v in ("none", "compactor", "kyverno")]
        kube.close()
    out = [table(rows), "", *ratios(rows), ""]
    unmutated = sum(s.creation.pods - s.creation.mutated for s in samples if s.variant != "none")
    checks = [("every webhook configuration points at a loopback URL", not wrong,
               "; ".join(wrong) or "all of them"),
              ("zero failed creations", all(r.failures == 0 for r in rows),
               ", ".join(f"{r.variant}: {r.failures}" for r in rows)),
              ("every Pod mutated by the webhook under test", unmutated == 0,
               f"{unmutated} unmutated")]
    out += [f"{'PASS' if ok else 'FAIL'}: {name} ({detail})" for name, ok, detail in checks]
    text = "\n".join(out)
    print("\n" + text)
    (RESULTS / "bench-peers.md").write_text(text + "\n")
    return 0 if all(ok for _, ok, _ in checks) else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pods", type=int, default=2000, help="Pods per run")
    parser.add_argument("--parallel", type=int, default=16)
    args = parser.parse_args()
    sys.exit(run(args.repeats, args.pods, args.parallel))


if __name__ == "__main__":
    main()
