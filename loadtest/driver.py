"""`make bench`: admission latency and throughput, side by side with the stack's own ceiling.

One run, everything on loopback, bounded in time:
1. baseline and warm, interleaved (A B A B A B): Starlette/uvicorn/TLS answering a fixed
   AdmissionReview (the ceiling), then the Compactor webhook with its owners known; the ratio
   of each pair, judged on the median; then the webhook paced at half its median rate;
2. cold burst — a fresh webhook, 500 Pods of one ReplicaSet at once over 200 connections,
   owners from the real API;
3. through the API server — Pods created via kube-apiserver one at a time, then by 16
   parallel creators with and without the webhook registered (interleaved).
Servers and locust are pinned to different CPUs where ``taskset`` and two CPUs exist.
Writes a table to stdout and loadtest/results/ (CSV, Markdown, latency PNG), then PASS/FAIL.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson

from compaction import names
from compaction.intent import Intent
from compaction.resource_plan import ResourcePlan
from compaction.static_policy import ContainerResources
from loadtest import creators, report, swarm
from loadtest.report import Row
from localcluster import Cluster, ClusterConfig, scrape
from localcluster.kube import path, wait_for
from localcluster.process import Process, free_port
from localcluster.procstat import cpu_seconds, peak_rss_mib
from localcluster.scrape import delta, histogram, quantile
from localcluster.stack import (
    WEBHOOK_NAMESPACE_LABEL,
    apply_file,
    service_account_token,
    token_kubeconfig,
    webhook_configuration,
)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "loadtest" / "results"
INTENT = Intent("bench", {names.POLICY_LABEL: "bench"}, names.MANAGED_SCHEDULER)
ANNOTATIONS = {names.INTENT_ANNOTATION: INTENT.render()}
# One owner in six also carries a resource plan: those admissions patch container resources
# too (the namespace has no LimitRange; the plan says so).
RESOURCE_PLAN = ResourcePlan({"app": ContainerResources("app", {"cpu": "250m"},
                                                        {"memory": "512Mi"})})
PLANNED = {**ANNOTATIONS, names.RESOURCES_ANNOTATION: RESOURCE_PLAN.rendered}


def spread(values: list[float]) -> tuple[float, float, float]:
    """Median, lowest and highest."""
    return statistics.median(values), min(values), max(values)


def _q3(buckets: list[tuple[float, float]]) -> tuple[float, float, float]:
    """p50, p95, p99 in milliseconds."""
    p50, p95, p99 = (1000 * quantile(buckets, q) for q in (0.5, 0.95, 0.99))
    return p50, p95, p99


def _bodies(namespace: str, owners: list[dict[str, Any]], count: int, file: Path) -> Path:
    """AdmissionReview bodies as the API server sends them (a full Pod of realistic size)."""
    lines = []
    for i in range(count):
        owner = owners[i % len(owners)]
        pod = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": f"{owner['name']}-", "namespace": namespace,
                         "labels": {"app": owner["name"], "pod-template-hash": "7d9f8c6b5"},
                         "annotations": {"kubectl.kubernetes.io/restartedAt":
                                         "2026-12-01T10:00:00Z"},
                         "ownerReferences": [{**owner, "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": {"containers": [{
                "name": "app", "image": "registry.k8s.io/pause:3.10",
                "env": [{"name": f"VAR_{k}", "value": "x" * 40} for k in range(20)],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                              "limits": {"memory": "256Mi"}},
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "volumeMounts": [{"name": "kube-api-access", "readOnly": True,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
            }], "volumes": [{"name": "kube-api-access", "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}}],
                "serviceAccountName": "default", "schedulerName": names.DEFAULT_SCHEDULER,
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                 "effect": "NoExecute", "tolerationSeconds": 300}]},
        }
        lines.append(orjson.dumps({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": str(uuid.uuid4()),
                        "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "operation": "CREATE", "namespace": namespace, "object": pod,
                        "userInfo": {"username": "system:serviceaccount:kube-system:"
                                     "replicaset-controller"}}}).decode())
    file.write_text("\n".join(lines) + "\n")
    return file


class Bench:
    def __init__(self, seconds: int, users: int, repeats: int = 3, creations: int = 1000,
                 parallel: int = 16) -> None:
        self.seconds, self.users, self.repeats = seconds, users, repeats
        self.creations, self.parallel = creations, parallel
        self.dir = Path(tempfile.mkdtemp(prefix="compactor-bench-"))
        RESULTS.mkdir(parents=True, exist_ok=True)
        self.cluster = Cluster(ClusterConfig(workdir=self.dir / "cluster"))
        self.rows: list[Row] = []
        self.checks: list[report.Check] = []
        self.ratio: report.Ratio = (0.0, 0.0, 0.0, [])
        self.creation_rates: dict[str, list[float]] = {}

    def _serve(self, name: str, argv: list[str], env: dict[str, str]) -> tuple[Process, int]:
        port = free_port()
        cert, key = self.cluster.ca.serving(["localhost"], ["127.0.0.1"]).write(self.dir, name)
        proc = Process(name, swarm.pinned(swarm.SERVER_CPU, argv), self.dir / f"{name}.log", env={
            **os.environ, **env, "PORT": str(port), "CERT_FILE": str(cert),
            "KEY_FILE": str(key), "COMPACTOR_WEBHOOK_HOST": "127.0.0.1",
            "COMPACTOR_WEBHOOK_PORT": str(port), "COMPACTOR_WEBHOOK_CERT_FILE": str(cert),
            "COMPACTOR_WEBHOOK_KEY_FILE": str(key), "COMPACTOR_WEBHOOK_LOG_LEVEL": "warning"})
        proc.start()
        self.cluster.processes.append(proc)
        proc.wait_healthy(lambda: httpx.get(f"https://127.0.0.1:{port}/readyz", verify=False,
                                            timeout=1).status_code == 200, 30)
        return proc, port

    def _webhook(self, name: str, watch_owners: bool = True) -> tuple[Process, int]:
        token = service_account_token(self.kube, names.INSTALL_NAMESPACE, "compactor-webhook")
        kc = token_kubeconfig(self.cluster, token, self.dir / f"{name}.kubeconfig")
        return self._serve(name, [sys.executable, "-m", "webhook"],
                           {"COMPACTOR_WEBHOOK_KUBECONFIG": str(kc),
                            "COMPACTOR_WEBHOOK_WATCH_OWNERS": str(watch_owners).lower()})

    def _metrics(self, port: int) -> str:
        return httpx.get(f"https://127.0.0.1:{port}/metrics", verify=False, timeout=10).text

    def _run(self, name: str, proc: Process, port: int, bodies: Path, rate: float = 0.0,
             users: int | None = None, keep: bool = True) -> Row:
        hist = "compactor_admission_duration_seconds"
        before = histogram(self._metrics(port), hist) if name != "baseline" else []
        cpu0 = cpu_seconds(proc.pid or 0)
        stats = swarm.run(port, bodies, users or self.users, self.seconds, rate,
                          self.dir / name.replace(" ", "_"))
        cpu = cpu_seconds(proc.pid or 0) - cpu0
        server = delta(histogram(self._metrics(port), hist), before) if before else []
        s50, s95, s99 = _q3(server)
        row = Row(name, stats["rps"], stats["p50"], stats["p95"], stats["p99"], s50, s95, s99,
                  1000 * cpu / max(stats["requests"], 1), peak_rss_mib(proc.pid or 0),
                  int(stats["failures"]), int(stats["requests"]))
        if keep:
            self.rows.append(row)
        print(f"  {name}: {row.rps:.0f} req/s, p99 {row.p99:.1f} ms, "
              f"server p99 {row.server_p99:.2f} ms", flush=True)
        return row

    def run(self) -> int:
        with self.cluster:
            # No scheduler: every Pod the runs create stays Pending, with or without the
            # webhook, so the API server does the same work after admission in each.
            self.cluster.start_controller_manager()
            self.kube = self.cluster.client()
            self.kube.ensure_namespace(names.INSTALL_NAMESPACE)
            apply_file(self.kube, ROOT / "deploy" / "rbac" / "webhook.yaml")
            ns = "bench"
            self.kube.ensure_namespace(ns, default_service_account=True)
            owners = self._owners(ns)
            warm_bodies = _bodies(ns, owners, 2000, self.dir / "warm.jsonl")

            print(f"baseline and warm, interleaved {self.repeats} times ...", flush=True)
            bproc, bport = self._serve("baseline", [sys.executable, "-m", "loadtest.baseline"],
                                       {})
            proc, port = self._webhook("warm")
            for line in warm_bodies.read_text().splitlines()[:len(owners) * 2]:
                httpx.post(f"https://127.0.0.1:{port}/mutate", content=line, verify=False)
            pairs = []
            for _ in range(self.repeats):
                pairs.append((self._run("baseline", bproc, bport, warm_bodies, keep=False),
                              self._run("warm", proc, port, warm_bodies, keep=False)))
            bproc.stop()
            base, warm = (_median_row(name, [p[i] for p in pairs])
                          for i, name in enumerate(("baseline", "warm")))
            self.rows += [base, warm]
            ratios = [w.rps / b.rps for b, w in pairs]
            half = warm.rps / 2
            users = max(4, self.users // 2)
            paced = self._run("warm at half rate", proc, port, warm_bodies, rate=half / users,
                              users=users)
            proc.stop()

            print("cold burst ...", flush=True)
            burst = self._cold_burst(ns, owners[0])

            print("through the API server ...", flush=True)
            through = self._through_apiserver(ns, owners)
            concurrent = self._concurrent_creation(ns, owners)
            self.kube.close()

        cache_mib, feed_mib = _owners_rss("cache"), _owners_rss("feed")
        ratio, low, high = spread(ratios)
        self.ratio = (ratio, low, high, ratios)
        self.checks = [
            ("median warm throughput >= 0.85 x baseline over interleaved pairs", ratio >= 0.85,
             f"median {ratio:.2f}x, spread {low:.2f}–{high:.2f}x over {len(ratios)} pairs: "
             + ", ".join(f"{r:.2f}" for r in ratios)),
            ("warm server-side p99 < 2 ms at half the warm median rate",
             paced.server_p99 < 2.0, f"{paced.server_p99:.2f} ms at {paced.rps:.0f} req/s"),
            ("cold burst: at most one GET per distinct owner", burst[0] <= burst[1],
             f"{burst[0]} GETs for {burst[1]} owners (namespace included)"),
            ("RSS < 150 MiB with 100,000 cached owners", cache_mib < 150, f"{cache_mib:.0f} MiB"),
            ("RSS < 150 MiB with 100,000 owners in the watch feed", feed_mib < 150,
             f"{feed_mib:.0f} MiB"),
            ("zero failed requests", all(r.failures == 0 for r in self.rows) and through
             and concurrent, ", ".join(f"{r.name}: {r.failures}" for r in self.rows)),
        ]
        report.write(RESULTS, self.rows, self.checks, self.ratio, self.creation_rates)
        return 0 if all(ok for _, ok, _ in self.checks) else 1

    def _owners(self, ns: str) -> list[dict[str, Any]]:
        """A Deployment's ReplicaSet, a StatefulSet and a CronJob, as the webhook meets them."""
        out = []
        for i in range(4):
            self.kube.create(path("deployments", ns), {
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": f"web-{i}",
                             "annotations": PLANNED if i == 0 else ANNOTATIONS},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"app": f"web-{i}"}},
                         "template": {"metadata": {"labels": {"app": f"web-{i}"}},
                                      "spec": {"containers": [{"name": "c", "image": "p"}]}}}})
        rss = wait_for("replicasets", lambda: (lambda r: r if len(r) == 4 else None)(
            self.kube.items(path("replicasets", ns))))
        out += [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": r["metadata"]["name"],
                 "uid": r["metadata"]["uid"]} for r in rss]
        sts = self.kube.create(path("statefulsets", ns), {
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "annotations": ANNOTATIONS},
            "spec": {"replicas": 0, "serviceName": "db",
                     "selector": {"matchLabels": {"app": "db"}},
                     "template": {"metadata": {"labels": {"app": "db"}},
                                  "spec": {"containers": [{"name": "c", "image": "p"}]}}}})
        cron = self.kube.create(path("cronjobs", ns), {
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "nightly", "annotations": ANNOTATIONS},
            "spec": {"schedule": "0 0 1 1 *", "suspend": True, "jobTemplate": {"spec": {
                "template": {"spec": {"restartPolicy": "Never",
                                      "containers": [{"name": "c", "image": "p"}]}}}}}})
        job = self.kube.create(path("jobs", ns), {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "nightly-1", "ownerReferences": [{
                "apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly",
                "uid": cron["metadata"]["uid"], "controller": True}]},
            "spec": {"suspend": True, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "p"}]}}}})
        out.append({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db",
                    "uid": sts["metadata"]["uid"]})
        out.append({"apiVersion": "batch/v1", "kind": "Job", "name": "nightly-1",
                    "uid": job["metadata"]["uid"]})
        return out

    def _cold_burst(self, ns: str, owner: dict[str, Any]) -> tuple[int, int]:
        # The cache path alone: a watch feed would already know the ReplicaSet.
        proc, port = self._webhook("cold", watch_owners=False)
        bodies = _bodies(ns, [owner], 500, self.dir / "burst.jsonl").read_text().splitlines()

        # 500 requests at once over 200 connections: the webhook accepts at most 256
        # (webhook.settings' max_connections) and answers 503 past that, deliberately.
        async def fire() -> list[httpx.Response]:
            async with httpx.AsyncClient(verify=False, timeout=30,
                                         limits=httpx.Limits(max_connections=200)) as client:
                return await asyncio.gather(*(client.post(
                    f"https://127.0.0.1:{port}/mutate", content=b) for b in bodies))

        cpu0, started = cpu_seconds(proc.pid or 0), time.monotonic()
        answers = asyncio.run(fire())
        elapsed = time.monotonic() - started
        text = self._metrics(port)
        gets = int(scrape.sample(text, "compactor_owner_api_requests_total"))
        patched = sum(1 for a in answers
                      if a.status_code == 200 and "patch" in a.json()["response"])
        server = histogram(text, "compactor_admission_duration_seconds")
        failures = sum(1 for a in answers if a.status_code != 200) + (500 - patched)
        nan = float("nan")
        row = Row("cold burst (500 Pods, one ReplicaSet)", 500 / elapsed, nan, nan, nan,
                  *_q3(server), 1000 * (cpu_seconds(proc.pid or 0) - cpu0) / 500,
                  peak_rss_mib(proc.pid or 0), failures, 500, gets=str(gets))
        self.rows.append(row)
        proc.stop()
        # The namespace (for its opt-out label), the ReplicaSet (followed to its owner) and the
        # Deployment, the workload whose intent counts.
        return gets, 3

    def _through_apiserver(self, ns: str, owners: list[dict[str, Any]]) -> bool:
        proc, port = self._webhook("apiserver")
        name = "compactor-bench"
        config = webhook_configuration(name, port, "bench", self.cluster.ca.cert_pem,
                                       failure_policy="Fail")
        self.kube.patch(path("namespaces", name=ns),
                        {"metadata": {"labels": {WEBHOOK_NAMESPACE_LABEL: "bench"}}})
        self.kube.create(path("mutatingwebhookconfigurations"), config)
        owner = {**owners[-2], "controller": True}  # the StatefulSet: it never adopts these
        pod = {"metadata": {"generateName": "api-", "ownerReferences": [owner]},
               "spec": {"containers": [{"name": "c", "image": "pause"}]}}
        wait_for("webhook in use", lambda: names.POLICY_LABEL in (
            self.kube.create(path("pods", ns), pod)["metadata"].get("labels") or {}))
        def calls() -> scrape.Buckets:
            """The API server's own histogram of its calls to our webhook."""
            return scrape.histogram(self.kube.raw("/metrics").text,
                                    "apiserver_admission_webhook_admission_duration_seconds",
                                    {"name": f"{name}.pods.compactor.dev"})
        before = calls()
        ok, started, n = True, time.monotonic(), 300
        for _ in range(n):
            made = self.kube.create(path("pods", ns), pod)
            ok &= names.POLICY_LABEL in (made["metadata"].get("labels") or {})
        elapsed = time.monotonic() - started
        hist = delta(calls(), before)
        nan = float("nan")
        self.rows.append(Row("through the API server (sequential creates)", n / elapsed,
                             nan, nan, nan, *_q3(hist), nan, peak_rss_mib(proc.pid or 0),
                             0 if ok else 1, n))
        self.kube.delete(path("mutatingwebhookconfigurations", name=name))
        proc.stop()
        return ok

    def _concurrent_creation(self, ns: str, owners: list[dict[str, Any]]) -> bool:
        """``parallel`` creators, with the webhook registered and without, interleaved."""
        proc, port = self._webhook("concurrent")
        name = "compactor-bench-concurrent"
        owner = {**owners[-2], "controller": True}
        pod = {"metadata": {"generateName": "api-", "ownerReferences": [owner]},
               "spec": {"containers": [{"name": "c", "image": "pause"}]}}
        runs: dict[str, list[tuple[creators.Creation, list[tuple[float, float]]]]] = {
            "with": [], "without": []}
        ok = True
        webhook = f"{name}.pods.compactor.dev"
        for _ in range(self.repeats):
            for variant in ("without", "with"):
                if variant == "with":
                    self.kube.create(path("mutatingwebhookconfigurations"), webhook_configuration(
                        name, port, "bench", self.cluster.ca.cert_pem, failure_policy="Fail"))
                    wait_for("webhook in use", lambda: names.POLICY_LABEL in (
                        self.kube.create(path("pods", ns), pod)["metadata"].get("labels") or {}))
                before = creators.webhook_histogram(self.kube, webhook)
                run = creators.create_pods(self.cluster.credentials, ns, pod, self.creations,
                                           self.parallel)
                hist = scrape.delta(creators.webhook_histogram(self.kube, webhook), before)
                runs[variant].append((run, hist))
                print(f"  {self.parallel} creators, {variant} the webhook: "
                      f"{run.per_second:.0f} Pods/s", flush=True)
                ok &= run.failures == 0 and (variant == "without" or run.mutated == run.pods)
                if variant == "with":
                    self.kube.delete(path("mutatingwebhookconfigurations", name=name))
                    wait_for("webhook gone", lambda: names.POLICY_LABEL not in (
                        self.kube.create(path("pods", ns), pod)["metadata"].get("labels") or {}))
                creators.clear(self.kube, ns)
        nan = float("nan")
        for variant in ("without", "with"):
            done = runs[variant]
            rate = statistics.median(r.per_second for r, _ in done)
            p50 = statistics.median(1000 * scrape.quantile(h, 0.5) for _, h in done)
            p99 = statistics.median(1000 * scrape.quantile(h, 0.99) for _, h in done)
            rss = peak_rss_mib(proc.pid or 0) if variant == "with" else nan
            self.rows.append(Row(
                f"through the API server ({self.parallel} creators, {variant} the webhook)",
                rate, nan, nan, nan, p50 if variant == "with" else nan, nan,
                p99 if variant == "with" else nan, nan, rss,
                sum(r.failures for r, _ in done), sum(r.pods for r, _ in done)))
        self.creation_rates = {v: [r.per_second for r, _ in runs[v]] for v in runs}
        proc.stop()
        return ok


def _median_row(name: str, rows: list[Row]) -> Row:
    """Each figure's median over interleaved repeats of one scenario."""
    def med(attr: str) -> float:
        return float(statistics.median(getattr(r, attr) for r in rows))
    return Row(name, med("rps"), med("p50"), med("p95"), med("p99"), med("server_p50"),
               med("server_p95"), med("server_p99"), med("cpu_per_1000"),
               max(r.peak_rss_mib for r in rows), sum(r.failures for r in rows),
               sum(r.requests for r in rows))


def _owners_rss(where: str) -> float:
    """Peak RSS of a process holding 100,000 owners in the cache or in the watch feed."""
    out = subprocess.run([sys.executable, "-m", "loadtest.cache_rss", "100000", where],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    return float(json.loads(out.stdout)["peak_mib"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=20, help="length of each locust run")
    parser.add_argument("--users", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3,
                        help="interleaved baseline/warm pairs and creation runs")
    parser.add_argument("--creations", type=int, default=1000,
                        help="Pods per concurrent creation run")
    parser.add_argument("--parallel", type=int, default=16, help="concurrent creators")
    args = parser.parse_args()
    sys.exit(Bench(args.seconds, args.users, args.repeats, args.creations,
                   args.parallel).run())


if __name__ == "__main__":
    main()
