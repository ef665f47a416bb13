"""`python -m localcluster.demo.observe`: the dashboard picture of docs/observability.md, from a
real run.

The 6-node compaction of the end-to-end test (webhook registered with the API server,
controller, compaction scheduler, the real descheduler) with a Prometheus scraping the
webhook and the controller; then a few minutes of traffic: managed Deployments scaled up and
down, Pods without a controller (skipped), Pods of a workload no policy covers (unchanged) and
of a Deployment whose intent annotation is unreadable and which a cluster policy keeps the
controller from correcting (failed open, and a failed write every pass). Finally every panel of
deploy/grafana/compactor.json is drawn from Prometheus' series to a PNG.
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from compaction import names
from localcluster import ApiError, Cluster, ClusterConfig, Kube
from localcluster.cluster.control_plane import ROOT
from localcluster.cluster.kube import path, wait_for
from localcluster.cluster.prometheus import Prometheus, Target
from localcluster.cluster.stack import start_local
from localcluster.demo import dashboard as dash
from localcluster.demo.compaction_run import run
from localcluster.demo.scenario import small

OUT = ROOT / "deploy" / "grafana" / "compactor.png"
PAUSE = "registry.k8s.io/pause:3.10"


def _scale(kube: Kube, kind: str, ns: str, name: str, replicas: int) -> None:
    kube.patch(path(kind, ns, name, sub="scale"), {"spec": {"replicas": replicas}})


def deny_controller_updates(kube: Kube, name: str, namespace: str,
                            workloads: list[str]) -> None:
    """A ValidatingAdmissionPolicy that refuses the controller's writes to these Deployments,
    as a cluster's own policy might: the controller cannot correct their intent annotations,
    counts a failed write every pass, and the webhook meets an unreadable intent. Returns once
    the API server enforces it (policies take effect asynchronously)."""
    api = "/apis/admissionregistration.k8s.io/v1"
    controller = f"system:serviceaccount:{names.INSTALL_NAMESPACE}:compactor-controller"
    kube.apply(f"{api}/validatingadmissionpolicies/{name}", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {"failurePolicy": "Fail",
                 "matchConstraints": {"resourceRules": [{
                     "apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["UPDATE"],
                     "resources": ["deployments"]}]},
                 "matchConditions": [
                     {"name": "by-the-controller",
                      "expression": f"request.userInfo.username == '{controller}'"},
                     {"name": "these", "expression": f"request.namespace == '{namespace}' && "
                      f"request.name in {json.dumps(workloads)}"}],
                 "validations": [{"expression": "false",
                                  "message": "this Deployment's metadata is not Compactor's"}]}})
    kube.apply(f"{api}/validatingadmissionpolicybindings/{name}", {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"]}})
    as_controller = {"Impersonate-User": controller}
    probe = path("deployments", namespace, workloads[0])

    def enforced() -> bool:
        try:
            kube.request("PATCH", probe, {"metadata": {"labels": {"probe": "x"}}},
                         "application/merge-patch+json", headers=as_controller)
        except ApiError as e:
            return e.status in (403, 422) and "not Compactor's" in e.message
        return False
    wait_for(f"the policy {name} enforced", enforced)


def remove_denial(kube: Kube, name: str) -> None:
    api = "/apis/admissionregistration.k8s.io/v1"
    kube.delete(f"{api}/validatingadmissionpolicybindings/{name}")
    kube.delete(f"{api}/validatingadmissionpolicies/{name}")


def garbled_deployment(name: str, intent: str, replicas: int = 0) -> dict[str, Any]:
    """A Deployment whose intent annotation the webhook cannot read."""
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "annotations": {names.INTENT_ANNOTATION: intent}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                         "name": "app", "image": PAUSE,
                         "resources": {"requests": {"cpu": "50m"}}}]}}}}


def _traffic_objects(kube: Kube) -> None:
    kube.ensure_namespace("legacy", default_service_account=True)
    labels = {"app": "legacy"}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{
        "name": "app", "image": PAUSE, "resources": {"requests": {"cpu": "50m"}}}]}}
    kube.create(path("deployments", "legacy"), {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "legacy"},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": template}})
    kube.create(path("deployments", "legacy"), garbled_deployment("garbled", "{oops"))
    deny_controller_updates(kube, "observe-garbled", "legacy", ["garbled"])


def traffic(kube: Kube, minutes: float, period: float = 15.0) -> None:
    """Admissions of every outcome, paced so that a one-minute rate has something to show."""
    sizes = itertools.cycle([(6, 4, 2, 1), (8, 3, 3, 0), (5, 5, 1, 1), (7, 3, 2, 0)])
    deadline = time.monotonic() + minutes * 60
    round_ = 0
    while time.monotonic() < deadline:
        web, worker, legacy, garbled = next(sizes)
        _scale(kube, "deployments", "production", "web", web)
        _scale(kube, "deployments", "batch", "worker", worker)
        _scale(kube, "deployments", "legacy", "legacy", legacy)
        _scale(kube, "deployments", "legacy", "garbled", garbled)
        kube.create(path("pods", "batch"), {"metadata": {"name": f"bare-{round_}"}, "spec": {
            "containers": [{"name": "c", "image": PAUSE}]}})
        if round_:
            kube.delete(path("pods", "batch", f"bare-{round_ - 1}"))
        round_ += 1
        print(f"  traffic round {round_}: web={web} worker={worker} legacy={legacy}",
              flush=True)
        time.sleep(period)


def observe(cluster: Cluster, workdir: Path, out: Path, minutes: float) -> dict[str, int]:
    kube, stack = start_local(cluster, workdir / "compactor", resync_seconds=5.0)
    assert stack.webhook is not None
    prom = Prometheus(cluster.bin / "prometheus", workdir / "prometheus", [
        Target("compactor-webhook", f"127.0.0.1:{stack.webhook.port}", "https",
               cluster.pki / "ca.crt", "localhost"),
        Target("compactor-controller", f"127.0.0.1:{stack.metrics_port}")], interval=2.0,
        rule_files=[ROOT / "deploy" / "prometheus" / "alerts.yaml"])
    cluster.processes.append(prom.start())
    started = time.time()
    try:
        print("compaction of the end-to-end scenario ...", flush=True)
        outcome = run(cluster, kube, stack, small(by_eviction=True), interval=2.0)
        print(f"  {outcome.report.nodes_before} -> {outcome.report.nodes_after} nodes; "
              f"now {minutes:g} minutes of traffic", flush=True)
        _traffic_objects(kube)
        traffic(kube, minutes)
        prom.wait_for_scrapes(2)
        counts = dash.render(prom, dash.load(), out, started, time.time(), step=5.0,
                             rate_interval="1m")
    finally:
        prom.stop()
        kube.close()
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="compactor-observe-"))
    print(f"starting the local cluster in {workdir} ...", flush=True)
    with Cluster(ClusterConfig(workdir=workdir)) as cluster:
        counts = observe(cluster, workdir, args.out, args.minutes)
    empty = [title for title, n in counts.items() if not n]
    print(f"wrote {args.out}: {len(counts)} panels" +
          (f"; without series: {', '.join(empty)}" if empty else ""))


if __name__ == "__main__":
    main()
