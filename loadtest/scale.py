"""`make bench-e2e NODES=5000` (not in CI): the whole system at Kubernetes' scalability
limit, 5,000 nodes and about 150,000 Pods, beside a smaller size for growth.

Each size gets a cluster of its own, built by ``loadtest.kwok_cluster`` (nodes through the
API server, Pods straight into etcd: the scheduler and the controller manager would take
hours to make 150,000 Pods on two cores), shared by 15 teams (``scale_figures.policies``: ten
ClusterCompactionPolicies over two namespaces each, ten CompactionPolicies), every Pod
Running; kwok is stopped once the nodes are Ready (its heartbeats of 5,000 fake kubelets
kept the API server at 175 % of the two cores), and no controller manager runs (node
lifecycle would mark the nodes NotReady; its ReplicaSet controller would roll every
Deployment built without it). Then, in order:

1. the webhook (30 s owner cache) and the controller (its Lease, 30 s resync, 35 s grace)
   as processes with their own ServiceAccounts' tokens, until the controller's first pass;
2. the floor: a bare loop of the controller's work, a label PATCH per Pod, with 8, 16 and
   32 requests in flight, each on its own share of the Pods, timed;
3. the 20 policies created at once; time until no managed Pod is unlabelled, and until a
   policy has a node draining (the controller's ``compactor_nodes_draining``); as soon as
   the controller has rendered it, the compaction scheduler runs as a process (its
   configuration from the controller's ConfigMap) and its Deployment is given the status
   the controller manager would write for its one available Pod (without it, the planner
   pauses every drain: the evictees would wait for a scheduler that cannot run);
4. a steady window: the API server's own request counters by verb and resource, the
   controller's passes and their phases, Events and policy status writes per pass;
5. each policy's descheduler, the real binary with its rendered policy and its own
   ServiceAccount, in the order the CronJobs fire (``scale_figures.stagger``), one at a time
   so that each run's cost on the API server is its own.

The tables go to stdout and ``loadtest/results/bench-scale.md``, the goals judged at the
largest size.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import httpx
import orjson

from compaction import names
from compaction.intent import intent_for
from compaction.validation import parse_policy
from compaction.workload import WorkloadType
from loadtest import scale_figures as sf
from loadtest.kwok_cluster import build as build_cluster
from loadtest.kwok_cluster import send, shares, team_namespaces
from localcluster import Cluster, ClusterConfig, Kube
from localcluster.cluster import scrape
from localcluster.cluster.kube import path
from localcluster.cluster.process import free_port
from localcluster.cluster.procstat import cpu_seconds, peak_rss_mib
from localcluster.cluster.stack import (
    CompactorStack,
    evicted_pods,
    service_account_token,
    token_kubeconfig,
)
from localcluster.demo.scenario import Scenario, TeamPolicy, apply_policy

METADATA_ONLY: Final = {
    "Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"}
FLOOR_GROUP: Final = "floor.compactor.test"  # the floor's keys, the controller's renamed
IN_FLIGHT: Final = (8, 16, 32)
AGENT_APP: Final = "agent"  # the DaemonSet's Pods: no policy manages them
SCHEDULER_DEPLOYMENT: Final = names.MANAGED_SCHEDULER


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _process_name(name: str) -> str:
    return "webhook" if name.startswith("webhook-") else name


def _cpu(cluster: Cluster) -> dict[str, float]:
    return {_process_name(p.name): cpu_seconds(p.pid) for p in cluster.processes
            if p.pid is not None and p.running()}


def _rss(cluster: Cluster) -> dict[str, float]:
    return {_process_name(p.name): peak_rss_mib(p.pid) for p in cluster.processes
            if p.pid is not None and p.running()}


def _metrics(stack: CompactorStack) -> str:
    return httpx.get(f"http://127.0.0.1:{stack.metrics_port}/metrics", timeout=10).text


def _apiserver(kube: Kube) -> str:
    return kube.raw("/metrics").text


def managed_pods(nodes: int) -> list[tuple[str, str]]:
    """(namespace, name) of every Deployment's Pod ``kwok_cluster.build`` makes, the pinned
    ones aside."""
    return [(ns, f"{app}-{i}") for ns, app, replicas, _, _ in shares(nodes, sf.TEAMS)
            for i in range(replicas)]


def labelling_patches(policies: Sequence[TeamPolicy]) -> dict[str, bytes]:
    """Per namespace, the merge patch the controller labels its Pods with (the policy's
    labels and intent annotation, ``compaction.intent``), under keys of the floor's own, so
    that the policies still find every Pod unlabelled."""
    out = {}
    for p in policies:
        policy = parse_policy({"apiVersion": names.API_VERSION, "kind": p.kind, "metadata": {
            "name": p.name, "namespace": p.namespace, "uid": "floor"}, "spec": p.spec})
        intent = intent_for(policy, WorkloadType.DEPLOYMENT)
        body = orjson.dumps({"metadata": {
            "labels": {k.replace(names.GROUP, FLOOR_GROUP): v
                       for k, v in intent.labels.items()},
            "annotations": {names.INTENT_ANNOTATION.replace(names.GROUP, FLOOR_GROUP):
                            intent.render()}}})
        values = p.spec["scope"].get("namespaceSelector", {}).get("values") or [p.namespace]
        out.update(dict.fromkeys(values, body))
    return out


def floor(cluster: Cluster, pods: Sequence[tuple[str, str]], per_run: int,
          bodies: dict[str, bytes]) -> tuple[sf.FloorRun, ...]:
    """The controller's label PATCH of each Pod (``labelling_patches``), with 8, 16 and 32
    requests in flight, each on its own ``per_run`` Pods."""
    out = []
    for k, in_flight in enumerate(IN_FLIGHT):
        mine = pods[k::len(IN_FLIGHT)][:per_run]
        started = time.monotonic()
        send(cluster.credentials, ([("PATCH", path("pods", ns, name), bodies[ns],
                                     "application/merge-patch+json")] for ns, name in mine),
             f"floor, {in_flight} in flight", parallel=in_flight)
        out.append(sf.FloorRun(in_flight, len(mine), time.monotonic() - started))
        print(f"  floor: {in_flight} in flight, {out[-1].rate:.0f} PATCH/s", flush=True)
    return tuple(out)


class Probe:
    """Whether every managed Pod is labelled: one unlabelled Pod's metadata per namespace
    still to finish, asked of the watch cache; a namespace found done is not asked again (no
    Pod is created during the run)."""

    def __init__(self, kube: Kube, namespaces: Sequence[str]) -> None:
        self.kube, self.left = kube, list(namespaces)

    def done(self) -> bool:
        while self.left:
            out = self.kube.request("GET", path("pods", self.left[0]), params={
                "labelSelector": f"!{names.POLICY_LABEL},app!={AGENT_APP}", "limit": "1"},
                headers=METADATA_ONLY)
            if out.get("items"):
                return False
            self.left.pop(0)
        return True


def scheduler_available(now: str) -> dict[str, Any]:
    """The status the controller manager writes on the compaction scheduler's Deployment once
    its one Pod is available (no controller manager runs here; ``start_scheduler``'s process
    stands for that Pod)."""
    return {"status": {
        "observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1,
        "availableReplicas": 1, "conditions": [{
            "type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
            "message": "Deployment has minimum availability.", "lastUpdateTime": now,
            "lastTransitionTime": now}]}}


def _start_scheduler(stack: CompactorStack, kube: Kube) -> bool:
    """The compaction scheduler's process and its Deployment available, once the controller
    has rendered both; False while it has not."""
    ns = names.INSTALL_NAMESPACE
    cm = kube.find(path("configmaps", ns, names.SCHEDULER_CONFIGMAP))
    deployment = kube.find(path("deployments", ns, SCHEDULER_DEPLOYMENT))
    if cm is None or deployment is None:
        return False
    stack.start_scheduler()
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = scheduler_available(now)
    body["status"]["observedGeneration"] = deployment["metadata"].get("generation", 1)
    kube.patch(path("deployments", ns, SCHEDULER_DEPLOYMENT, sub="status"), body)
    return True


def _draining(stack: CompactorStack) -> bool:
    return scrape.value(_metrics(stack), "compactor_nodes_draining") > 0


def _wait(what: str, probe: Callable[[], bool], timeout: float, interval: float,
          also: Callable[[], None] = lambda: None) -> float:
    started = time.monotonic()
    while not probe():
        also()
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
    return time.monotonic() - started


def descheduler_run(stack: CompactorStack, kube: Kube, kubeconfig: Path, policy_id: str,
                    idle_cpu_per_s: float) -> sf.DeschedulerRun:
    """One run as the CronJob's Job runs it, timed and measured by ``wait4``."""
    cm = kube.get(path("configmaps", names.INSTALL_NAMESPACE,
                       names.descheduler_name(policy_id)))
    file = stack.dir / f"descheduler-{policy_id}.yaml"
    file.write_text(cm["data"]["policy.yaml"])
    apiserver = stack.cluster.process("kube-apiserver").pid
    log = stack.dir / f"descheduler-{policy_id}.log"
    # What it may evict: its policy's Pods the planner marked (counted before it is timed).
    marked = len(kube.items(path("pods"), f"{names.DRAINING_LABEL}={policy_id}"))
    before, cpu0, started = _apiserver(kube), cpu_seconds(apiserver), time.monotonic()
    with log.open("w") as out:
        child = subprocess.Popen(
            [str(stack.cluster.bin / "descheduler"), f"--kubeconfig={kubeconfig}",
             f"--policy-config-file={file}", "--v=3", "--bind-address=127.0.0.1",
             f"--secure-port={free_port()}", f"--cert-dir={stack.dir / 'descheduler-certs'}"],
            stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
    seconds = time.monotonic() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    cpu = cpu_seconds(apiserver) - cpu0 - idle_cpu_per_s * seconds
    text = log.read_text()
    if child.returncode != 0:
        raise RuntimeError(f"descheduler {policy_id} failed:\n{text[-3000:]}")
    if marked and not evicted_pods(text):  # why it left them: its own words
        said = [line for line in text.splitlines()
                if any(w in line.lower() for w in ("underutiliz", "evict", "threshold", "fit"))]
        print(f"  descheduler {policy_id} evicted none of {marked} marked Pods; its log says:\n"
              + "\n".join(f"    {line[:300]}" for line in said[-20:]), flush=True)
    return sf.DeschedulerRun(policy_id, seconds, usage.ru_maxrss / 1024,
                             sf.listed(before, _apiserver(kube)), max(cpu, 0.0),
                             len(evicted_pods(text)), marked)


def measure(nodes: int, steady_seconds: float, runs: int, minute_seconds: float,
            floor_share: float, keep: bool, label_timeout: float = 3600.0) -> sf.Figures:
    workdir = Path(tempfile.mkdtemp(prefix=f"compactor-bench-scale-{nodes}-"))
    load0 = _load()
    notes: list[str] = []
    try:
        with Cluster(ClusterConfig(workdir=workdir, start_timeout=300)) as cluster:
            cluster.start_kwok()
            kube = cluster.client()
            print(f"{nodes:,} nodes: building them and their Pods ...", flush=True)
            shape = build_cluster(cluster, kube, nodes, teams=sf.TEAMS)
            print(f"  built {shape.nodes:,} nodes and {shape.pods:,} Pods in "
                  f"{shape.seconds:.0f} s", flush=True)
            kwok = cluster.process("kwok")
            kwok.stop()
            cluster.processes.remove(kwok)
            stack = CompactorStack(cluster, kube, workdir / "compactor")
            stack.install()
            stack.start_webhook(cache_ttl=30.0)
            stack.start_controller(resync_seconds=30.0, grace_seconds=35.0)
            synced = _wait("the controller's first pass", lambda: scrape.value(
                _metrics(stack), "compactor_reconcile_duration_seconds_count") >= 1, 900, 2)
            print(f"  controller synced and passed once in {synced:.0f} s", flush=True)
            pods = managed_pods(nodes)
            per_run = max(1000, int(len(pods) * floor_share))
            floors = floor(cluster, pods, per_run, labelling_patches(sf.policies()))
            floor_s, best = sf.floor_seconds(floors, len(pods))
            time.sleep(5)

            m0, c0, cpu0 = _apiserver(kube), _metrics(stack), _cpu(cluster)
            probe = Probe(kube, team_namespaces(sf.TEAMS))
            policies = sf.policies()
            started = time.monotonic()
            apply_policy(kube, Scenario(nodes=nodes, teams=policies))
            first_drain = math.nan

            def watch_drain() -> None:
                nonlocal first_drain
                if math.isnan(first_drain) and _draining(stack):
                    first_drain = time.monotonic() - started
            shown = [time.monotonic()]

            scheduler = [False]

            def meanwhile() -> None:
                watch_drain()
                if not scheduler[0]:
                    try:
                        scheduler[0] = _start_scheduler(stack, kube)
                    except Exception as e:  # noqa: BLE001 - reported; the rest is measured
                        scheduler[0] = True
                        notes.append(f"the compaction scheduler did not start: {e}")
                if time.monotonic() - shown[0] >= 60:
                    shown[0] = time.monotonic()
                    rss = ", ".join(f"{k} {v:.0f}" for k, v in sorted(_rss(cluster).items()))
                    print(f"  {shown[0] - started:.0f} s: {len(probe.left)} of "
                          f"{len(team_namespaces(sf.TEAMS))} namespaces not yet all labelled;"
                          f" peak RSS (MiB) {rss}; load {_load()}", flush=True)
            try:
                labelled = _wait("every Pod labelled", probe.done, label_timeout, 2, meanwhile)
            except TimeoutError as e:
                labelled = math.nan
                notes.append(f"{e}: {len(probe.left)} namespaces still held unlabelled Pods")
                print(f"  {e}", flush=True)
            watch_drain()
            cpu1, c1 = _cpu(cluster), _metrics(stack)
            spent = time.monotonic() - started
            during = {k: v * spent / 60.0 for k, v in
                      sf.rates(m0, _apiserver(kube), spent).items()}
            print(f"  every Pod labelled {labelled:.1f} s after the policies "
                  f"(floor {floor_s:.1f} s)", flush=True)
            if not scheduler[0] and not _start_scheduler(stack, kube):
                notes.append("the controller rendered no compaction scheduler")
            time.sleep(15)  # the last passes and their echoes
            m2, c2, cpu2, t2 = _apiserver(kube), _metrics(stack), _cpu(cluster), time.monotonic()
            deadline = t2 + steady_seconds
            while time.monotonic() < deadline:
                watch_drain()
                time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
            m3, c3, cpu3 = _apiserver(kube), _metrics(stack), _cpu(cluster)
            window = time.monotonic() - t2
            rpm = sf.rates(m2, m3, window)
            steady = sf.phases(c2, c3)
            events, status = sf.events_and_status(rpm, steady.passes * 60.0 / window)
            idle = (cpu3.get("kube-apiserver", 0.0) - cpu2.get("kube-apiserver", 0.0)) / window

            token = service_account_token(kube, names.INSTALL_NAMESPACE,
                                          "compactor-descheduler")
            kubeconfig = token_kubeconfig(cluster, token, stack.dir / "descheduler.kubeconfig")
            schedule = sf.stagger([p.spec["descheduler"]["interval"] for p in policies],
                                  sf.CRON_EVERY)[:runs]
            done: list[sf.DeschedulerRun] = []
            began = time.monotonic()
            for minute, index in schedule:
                time.sleep(max(0.0, began + minute * minute_seconds - time.monotonic()))
                watch_drain()
                done.append(descheduler_run(stack, kube, kubeconfig, policies[index].id, idle))
                d = done[-1]
                print(f"  descheduler {d.policy}: {d.seconds:.1f} s, {d.rss_mib:.0f} MiB, "
                      f"{d.marked} marked for it, {d.evicted} evicted, "
                      f"API server {d.apiserver_cpu:.1f} CPU s", flush=True)
            rss = _rss(cluster)
            controller_rpm = (scrape.value(c3, "compactor_controller_api_requests")
                              - scrape.value(c2, "compactor_controller_api_requests")) \
                * 60.0 / window
            if best is not None:
                notes.append(f"floor: {len(pods):,} PATCHes at {best.rate:.0f}/s "
                             f"({best.in_flight} in flight), measured on {per_run:,} each")
            return sf.Figures(
                nodes=nodes, pods=len(pods), policies=len(policies), build_s=shape.seconds,
                labelled_s=labelled, first_drain_s=first_drain, floor_s=floor_s,
                floor=floors, labelling=sf.phases(c0, c1), steady=steady, rss_mib=rss,
                cpu_labelling={k: v - cpu0.get(k, 0.0) for k, v in cpu1.items()},
                cpu_steady={k: (v - cpu2.get(k, 0.0)) * 60.0 / window
                            for k, v in cpu3.items()},
                steady_rpm=rpm, labelling_requests=during, controller_rpm=controller_rpm,
                events_per_pass=events,
                status_writes_per_pass=status, load=f"{load0} → {_load()}",
                runs=tuple(done), notes=tuple(notes))
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="500,5000", help="node counts, comma-separated")
    parser.add_argument("--steady-seconds", type=float, default=120.0)
    parser.add_argument("--descheduler-runs", type=int, default=len(sf.policies()),
                        help="the first this many runs in the CronJobs' order")
    parser.add_argument("--minute-seconds", type=float, default=5.0,
                        help="a minute of the CronJobs' schedules, compressed to this")
    parser.add_argument("--floor-share", type=float, default=0.05,
                        help="each floor loop patches this share of the Pods (at least 1,000)")
    parser.add_argument("--keep", action="store_true", help="keep the clusters' directories")
    parser.add_argument("--label-timeout", type=float, default=3600.0,
                        help="stop waiting for every Pod labelled after this many seconds and "
                        "measure the rest (the labelling time then reads —)")
    parser.add_argument("--patch-concurrency", type=int, default=None,
                        help="COMPACTOR_CONTROLLER_PATCH_CONCURRENCY for the controller")
    parser.add_argument("--pass-budget", type=float, default=None,
                        help="COMPACTOR_CONTROLLER_PASS_BUDGET_SECONDS for the controller")
    args = parser.parse_args()
    for flag, env in ((args.patch_concurrency, "COMPACTOR_CONTROLLER_PATCH_CONCURRENCY"),
                      (args.pass_budget, "COMPACTOR_CONTROLLER_PASS_BUDGET_SECONDS")):
        if flag:
            os.environ[env] = str(flag)
    runs: list[sf.Figures] = []
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(parents=True, exist_ok=True)
    for nodes in sorted({int(n) for n in args.sizes.split(",") if n}):
        runs.append(measure(nodes, args.steady_seconds, args.descheduler_runs,
                            args.minute_seconds, args.floor_share, args.keep,
                            args.label_timeout))
        sections = [sf.table(runs), sf.requests_table(runs),
                    sf.requests_table(runs, attr="labelling_requests",
                                      what="requests while labelling"), sf.runs_table(runs),
                    "\n".join(f"- {r.nodes:,} nodes: {n}" for r in runs for n in r.notes)]
        checks = sf.verdicts(runs[-1])
        text = "\n\n".join(sections) + "\n\n" + "\n".join(
            f"{'PASS' if ok else 'FAIL'}: {n} ({d})" for n, ok, d in checks) + "\n"
        print("\n" + text, flush=True)
        (out / "bench-scale.md").write_text(text)
    raise SystemExit(0 if all(ok for _, ok, _ in sf.verdicts(runs[-1])) else 1)


if __name__ == "__main__":
    main()
