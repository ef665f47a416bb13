"""`make chaos`: the whole stack on the local cluster under load while faults are injected one
at a time, then hostile clients against a webhook, then the services' logs searched for the
secrets planted in the run. Prints the tables and writes them to ``chaos-out/``.

Bounded throughout: every wait has a deadline, the load stops by itself, and every process
is stopped by its PID at the end. Loopback only.
"""

from __future__ import annotations

import argparse
import secrets
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from localcluster.chaos import faults
from localcluster.chaos.harness import Chaos, ChaosConfig
from localcluster.chaos.hostile import HostileLoad, Timings, admissions
from localcluster.chaos.reliability import FaultReport, leaks, row, table
from localcluster.cluster.control_plane import Cluster, ClusterConfig
from localcluster.cluster.kube import path

# The ReplicaSet watch cache off, so that a watch resuming from a compacted revision gets
# the real 410 from etcd through the API server (the watch-expired fault).
APISERVER_FLAGS = ("--watch-cache-sizes=replicasets.apps#0",)

FAULTS: list[tuple[str, Callable[[Chaos], None]]] = [
    ("none", faults.baseline),
    ("webhook-kill", faults.webhook_kill),
    ("webhook-kill-fail", lambda c: faults.webhook_kill(c, "Fail")),
    ("replica-kill", faults.replica_kill),
    ("controller-kill-labelling", faults.controller_kill_labelling),
    ("controller-kill-evicting", faults.controller_kill_evicting),
    ("apiserver-restart", faults.apiserver_restart),
    ("etcd-restart", faults.etcd_restart),
    ("latency-1.5", lambda c: faults.latency(c, 1.5)),
    ("latency-5", lambda c: faults.latency(c, 5.0)),
    ("watch-expired", faults.watch_expired),
    ("cache-overflow", faults.cache_overflow),
    ("scheduler-kill", lambda c: faults.scheduler_gone(c, "kill")),
    ("scheduler-scaled-to-0", lambda c: faults.scheduler_gone(c, "scale")),
    ("scheduler-down-policy-disabled", lambda c: faults.scheduler_gone(c, "disable")),
]


def _review(chaos: Chaos) -> bytes:
    """An AdmissionReview for a Pod of one of the churned Deployments' ReplicaSets."""
    rs = chaos.kube.items(path("replicasets", "chaos"))[0]["metadata"]
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs["name"],
             "uid": rs["uid"], "controller": True}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"generateName": rs["name"] + "-", "namespace": "chaos",
                        "labels": {"app": rs["name"].rsplit("-", 1)[0]},
                        "ownerReferences": [owner]},
           "spec": {"containers": [{"name": "app", "image": "pause"}]}}
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                         "request": {"uid": "hostile-run", "operation": "CREATE",
                                     "kind": {"group": "", "version": "v1", "kind": "Pod"},
                                     "namespace": "chaos", "object": pod}})


def hostile(chaos: Chaos) -> list[tuple[str, Timings, str]]:
    """Normal admissions straight to one webhook replica, without and with hostile clients."""
    _, port = chaos.webhooks["webhook-a"]
    url, body = f"https://127.0.0.1:{port}/mutate", _review(chaos)
    quiet = admissions(url, lambda: body, count=300, interval=0.02)
    with HostileLoad("127.0.0.1", port, slowloris=200, nonreaders=20, byte_interval=0.5,
                     give_up=30) as load:
        time.sleep(1)
        busy = admissions(url, lambda: body, count=300, interval=0.02)
    h = load.outcome()
    closed = max(h.slowloris_open)
    return [("alone", quiet, ""),
            ("with 200 slowloris and 20 non-reading clients", busy,
             f"{h.slowloris_connected} slow connections, each closed by the server "
             f"{min(h.slowloris_open):.1f}–{closed:.1f} s after its first byte; "
             f"non-readers closed after {min(h.nonreaders_open):.0f}–"
             f"{max(h.nonreaders_open):.0f} s")]


def _print_rows(reports: list[FaultReport]) -> None:
    print("| " + " | ".join(row(reports[-1])) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m localcluster.chaos", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("chaos-out"))
    parser.add_argument("--only", nargs="*", default=None,
                        help=f"faults to run, of: {' '.join(n for n, _ in FAULTS)}")
    args = parser.parse_args()
    # SIGTERM unwinds like Ctrl-C, so that every process is still stopped by its PID.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args.out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="compactor-chaos-"))
    planted = {"env": f"env-{secrets.token_hex(16)}",
               "annotation": f"tok-{secrets.token_hex(16)}"}
    print(f"local cluster in {workdir}; faults one at a time:", flush=True)
    started = time.monotonic()
    config = ClusterConfig(workdir=workdir / "cluster", audit=True,
                           apiserver_flags=APISERVER_FLAGS)
    with Cluster(config) as cluster:
        chaos = Chaos(cluster, workdir / "compactor", ChaosConfig(secrets=planted))
        try:
            chaos.start()
            for name, fault in FAULTS:
                if args.only is None or name in args.only:
                    fault(chaos)
                    _print_rows(chaos.reports)
            quiet_and_busy = hostile(chaos)
            found, logs = chaos.secrets_to_find(), chaos.service_logs()
            leaked = leaks(found, logs)
            churn = chaos.churn
            load = (f"{churn.rollouts} rollouts, {len(churn.scales)} scale changes"
                    if churn else "")
        finally:
            chaos.stop()
    out = ["## Faults", "", table(chaos.reports), "", f"Load: {load}.", "",
           "## Normal admissions next to hostile clients (one webhook, TLS, new connection "
           "each)", "", "| | admissions | failed | p50 ms | p99 ms | max ms | |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    out += [f"| {name} | {t.count} | {t.failures} | {t.p50_ms:.1f} | {t.p99_ms:.1f} | "
            f"{t.max_ms:.1f} | {note} |" for name, t, note in quiet_and_busy]
    out += ["", "## Secrets in the logs", "",
            f"Searched {len(logs)} logs ({', '.join(sorted(logs))}) for {len(found)} values "
            f"({', '.join(sorted(found))}): "
            + ("none found." if not leaked else
               "FOUND " + "; ".join(f"{s} in {log}" for s, log in leaked)),
            "", f"Wall time {time.monotonic() - started:.0f} s."]
    text = "\n".join(out) + "\n"
    (args.out / "reliability.md").write_text(text)
    print("\n" + text)
    sys.exit(1 if leaked else 0)


if __name__ == "__main__":
    main()
