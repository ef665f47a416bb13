"""The scenarios of `make bench`, each measured into rows of the report: the baseline and the
warm webhook interleaved, then the webhook paced; a cold burst; Pods created through the API
server, one at a time and by parallel creators; the memory of 100,000 owners."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from compaction import names
from loadtest import creators, swarm
from loadtest.report import Row
from loadtest.workload import bodies
from localcluster import Cluster, Kube
from localcluster.cluster import scrape
from localcluster.cluster.kube import path, wait_for
from localcluster.cluster.process import Process, free_port
from localcluster.cluster.procstat import cpu_seconds, peak_rss_mib
from localcluster.cluster.scrape import delta, histogram, quantile
from localcluster.cluster.stack import (
    WEBHOOK_NAMESPACE_LABEL,
    service_account_token,
    token_kubeconfig,
    webhook_configuration,
)

ROOT = Path(__file__).resolve().parent.parent


def _q3(buckets: list[tuple[float, float]]) -> tuple[float, float, float]:
    """p50, p95, p99 in milliseconds."""
    p50, p95, p99 = (1000 * quantile(buckets, q) for q in (0.5, 0.95, 0.99))
    return p50, p95, p99


class Scenarios:
    """Webhooks served beside one started ``cluster``; ``rows`` collects what each scenario
    measured, in the order they ran, ``creation_rates`` the Pods/s of each creation run."""

    def __init__(self, cluster: Cluster, kube: Kube, workdir: Path, seconds: int, users: int,
                 repeats: int, creations: int, parallel: int) -> None:
        self.cluster, self.kube, self.dir = cluster, kube, workdir
        self.seconds, self.users, self.repeats = seconds, users, repeats
        self.creations, self.parallel = creations, parallel
        self.rows: list[Row] = []
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

    def baseline_and_warm(self, owners: list[dict[str, Any]], warm_bodies: Path
                          ) -> tuple[list[float], Row]:
        """Baseline and warm webhook in ``repeats`` interleaved pairs (the median of each kept),
        then the warm webhook paced at half its median rate: each pair's warm/baseline ratio,
        and the paced run."""
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
        return ratios, paced

    def cold_burst(self, ns: str, owner: dict[str, Any]) -> tuple[int, int]:
        """A fresh webhook meets 500 Pods of one ReplicaSet at once: the owner GETs it made,
        and the most it should (one per distinct owner)."""
        # The cache path alone: a watch feed would already know the ReplicaSet.
        proc, port = self._webhook("cold", watch_owners=False)
        burst = bodies(ns, [owner], 500, self.dir / "burst.jsonl").read_text().splitlines()

        # 500 requests at once over 200 connections: the webhook accepts at most 256
        # (webhook.settings' max_connections) and answers 503 past that, deliberately.
        async def fire() -> list[httpx.Response]:
            async with httpx.AsyncClient(verify=False, timeout=30,
                                         limits=httpx.Limits(max_connections=200)) as client:
                return await asyncio.gather(*(client.post(
                    f"https://127.0.0.1:{port}/mutate", content=b) for b in burst))

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

    def through_apiserver(self, ns: str, owners: list[dict[str, Any]]) -> bool:
        """Pods created through the API server one at a time; whether each was mutated."""
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

    def concurrent_creation(self, ns: str, owners: list[dict[str, Any]]) -> bool:
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


def owners_rss(where: str) -> float:
    """Peak RSS of a process holding 100,000 owners in the cache or in the watch feed."""
    out = subprocess.run([sys.executable, "-m", "loadtest.cache_rss", "100000", where],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    return float(json.loads(out.stdout)["peak_mib"])
