"""What an operator sees, for real: a Prometheus on loopback scrapes the webhook and two
controller replicas, every metric docs/observability.md documents is queried through its HTTP
API and checked against what this module did, the alert rules load and judge the live series, every
dashboard query returns a series and the dashboard renders to a PNG, and `kubectl get ccp`
shows the policy's state.

What this module does (and so what the metrics must say):
- a policy (external scheduler, so no scheduler Deployment) for namespace A, where
  Deployment ``web`` is managed; Deployment ``plain`` in namespace B is not; a policy
  whose cron interval the API server accepts but the parser rejects (Valid False);
- Deployments ``garbled`` and ``future`` in namespace B carry unreadable intents (malformed,
  unknown version) and a ValidatingAdmissionPolicy refuses the controller's writes to them:
  the leader fails to correct them in every pass (reconcile errors);
- the webhook runs with a role that lacks StatefulSets: that watch fails with 403 and stays
  unsynced, and a StatefulSet owner lookup fails (api_error);
- fifteen requests posted straight to the webhook: 4 patched (one of them for a Pod that
  names kai-scheduler), 2 unchanged, 3 skipped, 4 failed open (api_error, unknown_intent
  twice, invalid_owner), 2 rejected (not an AdmissionReview: HTTP 400; too large: HTTP 413).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from certs.certificate import read
from compaction.intent import Intent, parse_intent
from localcluster import Cluster, Kube
from localcluster.cluster import scrape
from localcluster.cluster.kube import path, wait_for
from localcluster.cluster.process import Process, free_port
from localcluster.cluster.prometheus import Prometheus, Series, Target
from localcluster.cluster.stack import CompactorStack, service_account_token, token_kubeconfig
from localcluster.demo import dashboard as dash
from localcluster.demo.observe import deny_controller_updates, garbled_deployment, remove_denial
from tests.integration.helpers import ROOT, admitted_by_an_older_crd, deployment
from tests.metric_tables import DocumentedMetric, documented_metrics
from tests.unit.webhook_fakes import pod, review
from webhook.review import OwnerRef

API = "apis/compactor.dev/v1alpha1"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yaml"
ROLE = "compactor-webhook-observed"
EXTERNAL = "other-scheduler"
# The kinds the webhook's watch feed follows, and where each is served.
KINDS = {"Namespace": "/api/v1/namespaces", "ReplicaSet": "/apis/apps/v1/replicasets",
         "Deployment": "/apis/apps/v1/deployments", "StatefulSet": "/apis/apps/v1/statefulsets",
         "DaemonSet": "/apis/apps/v1/daemonsets", "Job": "/apis/batch/v1/jobs",
         "CronJob": "/apis/batch/v1/cronjobs", "Rollout": "/apis/argoproj.io/v1alpha1/rollouts",
         "AnalysisRun": "/apis/argoproj.io/v1alpha1/analysisruns",
         "StrimziPodSet": "/apis/core.strimzi.io/v1beta2/strimzipodsets",
         "Model": "/apis/kubeai.org/v1/models"}
OUTCOMES = {"patched": 4, "unchanged": 2, "skipped": 3, "failed_open": 4, "rejected": 2}
FAILED_OPEN = {"api_error": 1, "unknown_intent": 2, "invalid_owner": 1}
REJECTED = {"malformed_review": 1, "too_large": 1}
DENIED = ["garbled", "future"]


@dataclass
class Observed:
    prom: Prometheus
    kube: Kube
    cluster: Cluster
    namespace: str
    other_namespace: str
    policy: str
    invalid_policy: str
    webhook_port: int
    cert_not_after: float
    served: dict[str, bool]
    started: float
    admitted_at: float = 0.0
    patches: list[list[dict[str, Any]]] = field(default_factory=list)

    def series(self, expr: str) -> list[Series]:
        return self.prom.query(expr)


def _restricted_webhook_rbac(kube: Kube) -> None:
    """deploy/rbac/webhook.yaml's role without StatefulSets, for an account of its own."""
    docs = [d for d in yaml.safe_load_all((ROOT / "deploy/rbac/webhook.yaml").read_text()) if d]
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    for rule in role["rules"]:
        rule["resources"] = [r for r in rule["resources"] if r != "statefulsets"]
    role["metadata"] = {"name": ROLE}
    kube.apply(path("serviceaccounts", "compactor-system", ROLE), {
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": ROLE, "namespace": "compactor-system"}})
    kube.apply(path("clusterroles", name=ROLE), role)
    kube.apply(path("clusterrolebindings", name=ROLE), {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": ROLE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": ROLE, "namespace": "compactor-system"}]})


def _served(kube: Kube, url: str) -> bool:
    group_version, _, plural = url.rpartition("/")
    try:
        resources = kube.get(group_version).get("resources", [])
    except Exception:
        return False
    return any(r["name"] == plural for r in resources)


def _policy(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
            "metadata": {"name": name}, "spec": spec}


def _controller(stack: CompactorStack, name: str) -> tuple[Process, int]:
    """A second controller replica beside the stack's: same account, its own identity."""
    port = free_port()
    env = {**os.environ,
           "COMPACTOR_CONTROLLER_KUBECONFIG": str(token_kubeconfig(stack.cluster, (
               service_account_token(stack.kube, "compactor-system", "compactor-controller")),
               stack.dir / f"{name}.kubeconfig")),
           "COMPACTOR_CONTROLLER_RESYNC_SECONDS": "2",
           "COMPACTOR_CONTROLLER_METRICS_PORT": str(port),
           "COMPACTOR_CONTROLLER_METRICS_ADDRESS": "127.0.0.1",
           "COMPACTOR_CERTS_MODE": "off", "POD_NAME": name}
    proc = Process(name, [sys.executable, "-m", "controller"], stack.dir / f"{name}.log",
                   env=env)
    proc.start()
    stack.cluster.processes.append(proc)
    proc.wait_healthy(lambda: httpx.get(f"http://127.0.0.1:{port}/metrics",
                                        timeout=1).status_code == 200, 30)
    return proc, port


def _webhook(cluster: Cluster, kube: Kube, workdir: Path) -> tuple[Process, int, Path]:
    cert, key = cluster.ca.serving(["localhost"], ["127.0.0.1"]).write(workdir, "observed")
    kc = token_kubeconfig(cluster, service_account_token(kube, "compactor-system", ROLE),
                          workdir / "webhook.kubeconfig")
    port = free_port()
    proc = Process("webhook-observed", [sys.executable, "-m", "webhook"],
                   workdir / "webhook.log", env={
                       **os.environ, "COMPACTOR_WEBHOOK_HOST": "127.0.0.1",
                       "COMPACTOR_WEBHOOK_PORT": str(port),
                       "COMPACTOR_WEBHOOK_CERT_FILE": str(cert),
                       "COMPACTOR_WEBHOOK_KEY_FILE": str(key),
                       "COMPACTOR_WEBHOOK_KUBECONFIG": str(kc)})
    proc.start()
    cluster.processes.append(proc)
    proc.wait_healthy(lambda: httpx.get(f"https://127.0.0.1:{port}/readyz", verify=False,
                                        timeout=1).status_code == 200, 30)
    return proc, port, cert


def _scraped(port: int, name: str, **labels: str) -> float:
    """The webhook's series of ``name`` with exactly ``labels``; 0 while absent."""
    text = httpx.get(f"https://127.0.0.1:{port}/metrics", verify=False, timeout=5).text
    return scrape.sample(text, name, labels)


@pytest.fixture(scope="module")
def observed(cluster: Cluster, kube: Kube, workloads: Cluster,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Observed]:
    workdir = tmp_path_factory.mktemp("observed")
    stack = CompactorStack(cluster, kube, workdir)
    stack.install()
    _restricted_webhook_rbac(kube)
    suffix = uuid.uuid4().hex[:6]
    ns_a, ns_b = f"obs-a-{suffix}", f"obs-b-{suffix}"
    policy, invalid, denial = f"obs-{suffix}", f"obs-bad-{suffix}", f"obs-deny-{suffix}"
    ccp = path("clustercompactionpolicies", api=API)
    procs: list[Process] = []
    prom: Prometheus | None = None
    try:
        for ns in (ns_a, ns_b):
            kube.ensure_namespace(ns, default_service_account=True)
        kube.create(ccp, _policy(policy, {
            "scope": {"namespaceSelector": {"operator": "In", "values": [ns_a]}},
            "scheduler": {"useManagedScheduler": False, "externalSchedulerName": EXTERNAL}}))
        # Minute 61: the parser rejects it; so does today's CRD, so it is made under an
        # older one, as a policy from an earlier release would have been.
        admitted_by_an_older_crd(kube, "clustercompactionpolicies", None, _policy(invalid, {
            "scope": {"namespaceSelector": {"operator": "In", "values": [f"none-{suffix}"]}},
            "descheduler": {"interval": "61 * * * *"}}))
        kube.create(path("deployments", ns_a), deployment("web", 1))
        kube.create(path("deployments", ns_b), deployment("plain", 1))
        for name, text in zip(DENIED, ("{not json", '{"v":9,"policy":"p"}'), strict=True):
            kube.create(path("deployments", ns_b), garbled_deployment(name, text))
        deny_controller_updates(kube, denial, ns_b, DENIED)

        stack.start_controller(resync_seconds=2.0)
        procs.append(stack.cluster.process("compactor-controller"))
        second, second_port = _controller(stack, "compactor-controller-second")
        procs.append(second)

        wait_for("the intent on Deployment web", lambda: "compactor.dev/intent" in (
            kube.get(path("deployments", ns_a, "web"))["metadata"].get("annotations") or {}),
            timeout=90)
        for ns, app in ((ns_a, "web"), (ns_b, "plain"), (ns_b, "garbled"), (ns_b, "future")):
            wait_for(f"{app}'s ReplicaSet", lambda n=ns, a=app: kube.items(  # type: ignore[misc]
                path("replicasets", n), f"app={a}"))

        webhook, port, cert = _webhook(cluster, kube, workdir)
        procs.append(webhook)
        wait_for("the webhook's watches", lambda: all(
            _scraped(port, "compactor_owner_watch_synced", kind=k) == 1
            for k in ("Namespace", "ReplicaSet", "Deployment")))
        prom = Prometheus(cluster.bin / "prometheus", workdir / "prometheus", [
            Target("compactor-webhook", f"127.0.0.1:{port}", "https",
                   cluster.pki / "ca.crt", "localhost"),
            Target("compactor-controller", f"127.0.0.1:{stack.metrics_port}"),
            Target("compactor-controller", f"127.0.0.1:{second_port}")],
            interval=1.0, rule_files=[ALERTS])
        cluster.processes.append(prom.start())
        started = time.time()
        prom.wait_for_scrapes(2, since=started)
        yield Observed(prom, kube, cluster, ns_a, ns_b, policy, invalid, port,
                       read(cert.read_bytes()).not_after.timestamp(),
                       {k: _served(kube, u) for k, u in KINDS.items()}, started)
    finally:
        if prom is not None:
            prom.stop()
            if prom.process in cluster.processes:
                cluster.processes.remove(prom.process)
        for name in (policy, invalid):
            kube.delete(path("clustercompactionpolicies", name=name, api=API))
        for proc in procs:
            proc.stop()
            if proc in cluster.processes:
                cluster.processes.remove(proc)
        for ns in (ns_a, ns_b):
            kube.delete(path("namespaces", name=ns))
        remove_denial(kube, denial)
        kube.delete(path("clusterrolebindings", name=ROLE))
        kube.delete(path("clusterroles", name=ROLE))


def _post(port: int, body: bytes) -> dict[str, Any]:
    answer: dict[str, Any] = httpx.post(f"https://127.0.0.1:{port}/mutate", content=body,
                                        verify=False, timeout=10).json()["response"]
    assert answer["allowed"] is True
    return answer


def _patch(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return json.loads(base64.b64decode(answer["patch"])) if answer.get("patch") else []


@pytest.fixture(scope="module")
def admitted(observed: Observed) -> Observed:
    """The fifteen requests, then two scrapes of every target."""
    kube, ns, port = observed.kube, observed.namespace, observed.webhook_port
    (web_rs,) = kube.items(path("replicasets", ns), "app=web")
    web = OwnerRef("apps/v1", "ReplicaSet", web_rs["metadata"]["name"],
                   web_rs["metadata"]["uid"])
    (plain_rs,) = kube.items(path("replicasets", observed.other_namespace), "app=plain")
    plain = OwnerRef("apps/v1", "ReplicaSet", plain_rs["metadata"]["name"],
                     plain_rs["metadata"]["uid"])
    denied = {}
    for app in DENIED:
        (rs,) = kube.items(path("replicasets", observed.other_namespace), f"app={app}")
        denied[app] = OwnerRef("apps/v1", "ReplicaSet", rs["metadata"]["name"],
                               rs["metadata"]["uid"])
    web_deploy = kube.get(path("deployments", ns, "web"))
    parsed = parse_intent(web_deploy["metadata"]["annotations"]["compactor.dev/intent"])
    intent: Intent | None = parsed.intent
    assert intent is not None and intent.scheduler_name == EXTERNAL
    plain_ns = plain_rs["metadata"]["namespace"]

    for _ in range(3):
        observed.patches.append(_patch(_post(port, review(pod(ns, web), namespace=ns))))
    kai = _patch(_post(port, review(pod(ns, web, scheduler="kai-scheduler"), namespace=ns)))
    observed.patches.append(kai)
    compliant = pod(ns, web, labels=dict(intent.labels),
                    annotations={"compactor.dev/intent": intent.render()}, scheduler=EXTERNAL)
    unchanged = [_post(port, review(compliant, namespace=ns)),
                 _post(port, review(pod(plain_ns, plain), namespace=plain_ns))]
    skipped = [_post(port, review(pod("kube-system", web), namespace="kube-system")),
               _post(port, review(pod(ns, None), namespace=ns)),
               _post(port, review(pod(ns, web), operation="UPDATE", namespace=ns))]
    failed = [_post(port, review(pod(ns, OwnerRef("apps/v1", "StatefulSet", "db", "uid-db")),
                                 namespace=ns)),
              *(_post(port, review(pod(plain_ns, denied[app]), namespace=plain_ns))
                for app in DENIED),
              _post(port, review(pod(ns, OwnerRef("apps/v1", "ReplicaSet", "Not_A_Name",
                                                  "uid-x")), namespace=ns))]
    url = f"https://127.0.0.1:{port}/mutate"
    rejected = [httpx.post(url, content=b"{not an AdmissionReview", verify=False, timeout=10),
                httpx.post(url, content=b" " * (3 * 1024 * 1024 + 1), verify=False, timeout=30)]
    assert [r.status_code for r in rejected] == [400, 413]
    observed.admitted_at = time.time()
    assert all(observed.patches) and not any(_patch(a) for a in unchanged + skipped + failed)
    assert {"op": "add", "path": "/spec/schedulerName", "value": EXTERNAL} in \
        observed.patches[0]
    assert not any(op["path"] == "/spec/schedulerName" for op in kai)
    observed.prom.wait_for_scrapes(2, since=observed.admitted_at)
    # A pass comes at most every lease/3 seconds, longer than the scrapes above may span:
    # the error counter's rate is only there once Prometheus has sampled it across one.
    wait_for("a failing pass between two of Prometheus's samples", lambda: observed.series(
        "increase(compactor_reconcile_errors_total[5m]) > 0"), timeout=60)
    return observed


# --- every documented metric, through Prometheus -------------------------------------------

def _one(series: list[Series], **labels: str) -> float:
    match = [s for s in series if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(match) == 1, f"{labels}: {[s.labels for s in series]}"
    return match[0].points[-1][1]


def _by(series: list[Series], label: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for s in series:
        out[s.labels.get(label, "")] = out.get(s.labels.get(label, ""), 0) + s.points[-1][1]
    return out


def _kind_counts(o: Observed) -> dict[str, int]:
    return {k: len(o.kube.items(u)) for k, u in KINDS.items() if o.served[k] and k !=
            "StatefulSet"}


Check = Callable[[Observed, list[Series]], None]


def _watch_objects(o: Observed, series: list[Series]) -> None:
    got = _by(series, "kind")
    # Other tests' objects may still be going away: compare with a fresh count until equal.
    wait_for("watched objects to match the API server", lambda: all(
        _by(o.series("compactor_owner_watch_objects"), "kind")[k] == n
        for k, n in _kind_counts(o).items()), timeout=30)
    assert got["StatefulSet"] == 0  # never listed: the role forbids it
    for kind, served in o.served.items():
        if not served:
            assert got[kind] == 0


def _watch_synced(o: Observed, series: list[Series]) -> None:
    expected = {k: float(served and k != "StatefulSet") for k, served in o.served.items()}
    assert _by(series, "kind") == {**expected, "LimitRange": 1.0}  # the resource plans' guard


def _watch_served(o: Observed, series: list[Series]) -> None:
    assert _by(series, "kind") == {**{k: float(v) for k, v in o.served.items()},
                                   "LimitRange": 1.0}


def _watch_restarts(o: Observed, series: list[Series]) -> None:
    for s in series:
        kind, reason, value = s.labels["kind"], s.labels["reason"], s.points[-1][1]
        if kind == "StatefulSet" and reason == "error":
            assert value >= 1  # 403, retried with backoff
        else:
            assert value == 0, s.labels
    assert {(s.labels["kind"], s.labels["reason"]) for s in series} == {
        (k, r) for k in (*KINDS, "LimitRange") for r in ("expired", "error")}


def _lookups(o: Observed, series: list[Series]) -> None:
    got = _by(series, "result")
    assert got["error"] == 1  # the StatefulSet GET the role forbids
    assert got["invalid"] == 1  # the owner reference named Not_A_Name
    # Every admission that got past the request-only skip rules looked up its namespace.
    assert sum(got.values()) >= OUTCOMES["patched"] + OUTCOMES["unchanged"] + \
        OUTCOMES["failed_open"]
    assert got["hit"] > 0  # the watch feed answers: the webhook started after the owners
    api = o.series("compactor_owner_api_requests_total")
    assert _one(api) == got["miss"] + got["error"]


def _single(expected: float) -> Check:
    def check(o: Observed, series: list[Series]) -> None:
        assert _one(series) == expected
    return check


def _each_controller(check: Callable[[float], bool]) -> Check:
    def run(o: Observed, series: list[Series]) -> None:
        assert len(series) == 2
        for s in series:
            assert check(s.points[-1][1]), s
    return run


def _leader(o: Observed, series: list[Series]) -> None:
    assert sorted(s.points[-1][1] for s in series) == [0.0, 1.0]


def _reconcile_passes(o: Observed, series: list[Series]) -> None:
    # _count: the leader has passed at least once; the follower never.
    assert sorted(s.points[-1][1] > 0 for s in series) == [False, True]


def _admission_count(o: Observed, series: list[Series]) -> None:
    # Every decided review is timed; a rejected request gets no verdict to time.
    assert _one(series) == sum(OUTCOMES.values()) - OUTCOMES["rejected"]


def _reconcile_errors(o: Observed, series: list[Series]) -> None:
    # The leader fails to write the denied Deployments in every pass; the follower writes none.
    leader = {s.labels["instance"] for s in o.series("compactor_controller_leader == 1")}
    for s in series:
        failed = s.points[-1][1]
        assert (failed >= len(DENIED)) if s.labels["instance"] in leader else failed == 0, s


def _planned(limit: Callable[[Observed], float]) -> Check:
    """The leader's plan for the module's one valid policy, and nothing else: the invalid
    policy has no plan, the follower none at all."""
    def check(o: Observed, series: list[Series]) -> None:
        leader = {s.labels["instance"] for s in o.series("compactor_controller_leader == 1")}
        assert {s.labels["instance"] for s in series} <= leader
        assert {s.labels["policy"] for s in series} <= {o.policy}
        assert all(0 <= s.points[-1][1] <= limit(o) for s in series), series
    return check


def _nodes(o: Observed) -> float:
    return float(len(o.kube.items(path("nodes"))))


EXPECTED: dict[str, Check] = {
    "compactor_admission_duration_seconds": _admission_count,
    "compactor_admission_requests_total": lambda o, s: (
        None if _by(s, "outcome") == OUTCOMES else pytest.fail(f"{_by(s, 'outcome')}")),
    "compactor_admission_failed_open_total": lambda o, s: (
        None if _by(s, "reason") == FAILED_OPEN else pytest.fail(f"{_by(s, 'reason')}")),
    "compactor_admission_rejected_total": lambda o, s: (
        None if _by(s, "reason") == REJECTED else pytest.fail(f"{_by(s, 'reason')}")),
    "compactor_owner_lookups_total": _lookups,
    "compactor_owner_api_requests_total": lambda o, s: None,  # checked with the lookups
    "compactor_owner_cache_entries": lambda o, s: (
        None if _one(s) <= _by(o.series("compactor_owner_lookups_total"), "result")["miss"]
        else pytest.fail(f"{_one(s)} entries")),
    "compactor_owner_watch_objects": _watch_objects,
    "compactor_owner_watch_synced": _watch_synced,
    "compactor_owner_watch_served": _watch_served,
    "compactor_owner_watch_restarts_total": _watch_restarts,
    "compactor_gpu_scheduler_overrides_total": lambda o, s: (
        None if _by(s, "scheduler") == {"kai-scheduler": 1} else pytest.fail(str(s))),
    # No workload of this run has a resource plan.
    "compactor_resource_patches_total": lambda o, s: (
        None if set(_by(s, "outcome")) == {"applied", "unchanged", "conflict", "unpatchable",
                                           "limit_ranges_changed", "limit_ranges_unknown"}
        and not any(_by(s, "outcome").values()) else pytest.fail(str(_by(s, "outcome")))),
    "compactor_resource_plans_blocked_total": lambda o, s: (
        None if len(s) == 6 and set(_by(s, "reason")) == {
            "request_above_limit", "extended_request_not_limit", "limit_range"}
        and not any(_by(s, "reason").values()) else pytest.fail(str(_by(s, "reason")))),
    "compactor_intent_errors_total": lambda o, s: (
        None if _by(s, "reason") == {"malformed": 1, "unknown_version": 1}
        else pytest.fail(str(_by(s, "reason")))),
    "compactor_webhook_certificate_expiration_timestamp_seconds": lambda o, s: (
        None if abs(_one(s) - o.cert_not_after) < 1 else pytest.fail(f"{_one(s)}")),
    "compactor_reconcile_duration_seconds": _reconcile_passes,
    # Each phase of the leader's passes timed; the follower's series stay at 0.
    "compactor_reconcile_phase_duration_seconds": lambda o, s: (
        None if sorted(x.points[-1][1] > 0 for x in s) == [False] * 3 + [True] * 3
        and {x.labels["phase"] for x in s} == {"read", "plan", "write"}
        else pytest.fail(str([(x.labels, x.points[-1]) for x in s]))),
    "compactor_reconcile_errors_total": _reconcile_errors,
    "compactor_runtime_evictions_total": lambda o, s: (
        None if _by(s, "result") == {"evicted": 0, "pdb_blocked": 0, "skipped": 0}
        else pytest.fail(str(_by(s, "result")))),
    "compactor_suppressions_total": _each_controller(lambda v: v == 0),
    "compactor_suppressed_workloads": _each_controller(lambda v: v == 0),
    "compactor_controller_api_requests": _each_controller(lambda v: v > 0),
    "compactor_controller_api_watches": _each_controller(lambda v: v > 0),
    "compactor_controller_api_throttled": _each_controller(lambda v: v >= 0),
    "compactor_controller_api_cache_behind": _each_controller(lambda v: v >= 0),
    "compactor_controller_informed_objects": _each_controller(lambda v: v > 0),
    "compactor_controller_leader": _leader,
    "compactor_plan_duration_seconds": _reconcile_passes,
    # Other tests' Pods share this cluster's nodes: how many nodes the plan frees depends on
    # them; it has the policy as its label, and it is at most the cluster's nodes.
    "compactor_plan_nodes_in_use": _planned(_nodes),
    "compactor_plan_freeable_nodes": _planned(_nodes),
    "compactor_nodes_draining": _planned(lambda o: 1.0),  # maxDrainingNodes defaults to 1
    "compactor_nodes_unremovable": _planned(_nodes),
    # The stack runs the scheduler Deployment's Pod (on kwok): new Pods go to it. The leader
    # says so; a standby, which plans nothing, holds every state at 0.
    "compactor_scheduler_routing": lambda o, s: (
        None if _by(s, "state") in ({"Available": 1, "Starting": 0, "Unavailable": 0,
                                     "Recovering": 0},
                                    {"Available": 0, "Starting": 1, "Unavailable": 0,
                                     "Recovering": 0})
        else pytest.fail(str(_by(s, "state")))),
    "compactor_stranded_pods_replaced_total": _each_controller(lambda v: v == 0),
    # Other tests' workloads share this cluster: only the reasons are known.
    "compactor_pods_held_from_eviction": lambda o, s: (
        None if set(_by(s, "reason")) == {"eviction_budget", "recently_replaced"}
        else pytest.fail(str(_by(s, "reason")))),
    "compactor_drain_landings_total": lambda o, s: (
        None if _by(s, "outcome").get("free_node", 0) == 0
        else pytest.fail(f"landings on nodes the plan counted as free: {_by(s, 'outcome')}")),
}
DOCUMENTED = documented_metrics()


def test_every_documented_metric_has_an_expectation_here() -> None:
    """A metric added to the tables of docs/observability.md must be given its expected value
    below."""
    assert sorted(m.name for m in DOCUMENTED) == sorted(EXPECTED)


@pytest.mark.parametrize("metric", DOCUMENTED, ids=[m.name for m in DOCUMENTED])
def test_documented_metric_as_prometheus_scraped_it(admitted: Observed,
                                                    metric: DocumentedMetric) -> None:
    name = f"{metric.name}_count" if metric.type == "histogram" else metric.name
    series = admitted.series(name)
    assert series, f"Prometheus has no series {name}"
    if metric.type == "histogram":
        for part in ("_bucket", "_sum"):
            assert admitted.series(metric.name + part), metric.name + part
    for s in series:
        labels = set(s.labels) - {"__name__", "job", "instance"}
        assert labels == set(metric.labels), (s.labels, metric.labels)
        for label, values in metric.values.items():
            assert s.labels[label] in values, (s.labels, values)
    EXPECTED[metric.name](admitted, series)


# --- the alert rules on the live series ------------------------------------------------

# Evaluated without their `for:`, on what this module did. CompactorAdmissionLatencyHigh is
# left out: twelve admissions make a p99 that depends on the machine's load.
FIRING = {"CompactorWebhookFailingOpen", "CompactorOwnerWatchNotSynced",
          "CompactorReconcileErrors",  # the denied Deployments
          "CompactorWebhookCertificateExpiring"}  # the test CA issues for two days
QUIET = {"CompactorNoLeader", "CompactorWorkloadsSuppressed", "CompactorDeschedulerRunFailed",
         "CompactorSchedulerUnavailable"}  # the stack runs the scheduler Deployment's Pod


def _rules() -> dict[str, str]:
    doc = yaml.safe_load(ALERTS.read_text())
    return {r["alert"]: r["expr"] for g in doc["groups"] for r in g["rules"]}


def test_the_alert_rules_load_into_prometheus(admitted: Observed) -> None:
    loaded = admitted.prom.rules()
    assert {r["name"] for r in loaded} == set(_rules())
    assert all(r["health"] == "ok" for r in loaded), [(r["name"], r.get("lastError"))
                                                       for r in loaded]


def test_the_alert_rules_judge_the_live_series(admitted: Observed) -> None:
    rules = _rules()
    assert FIRING | QUIET | {"CompactorAdmissionLatencyHigh"} == set(rules)
    for name in FIRING:
        assert admitted.series(rules[name]), f"{name} should fire on this module's data"
    for name in QUIET:
        assert not admitted.series(rules[name]), f"{name} should be quiet"
    (unsynced,) = admitted.series(rules["CompactorOwnerWatchNotSynced"])
    assert unsynced.labels["kind"] == "StatefulSet"  # not the kinds nobody serves


# --- the dashboard -----------------------------------------------------------------------

PANELS = dash.panels(dash.load())


def test_every_dashboard_query_parses_with_promtool(cluster: Cluster, tmp_path: Path) -> None:
    rules = [{"record": f"panel_{i}_{q.ref}", "expr": dash.promql(q.expr)}
             for i, p in enumerate(PANELS) for q in p.queries]
    file = tmp_path / "dashboard-queries.yaml"
    file.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    out = subprocess.run([str(cluster.bin / "promtool"), "check", "rules", str(file)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(rules)} rules found" in out.stdout


def test_the_dashboard_has_a_datasource_variable_and_the_panels_it_promises() -> None:
    model = dash.load()
    (var,) = [v for v in model["templating"]["list"] if v["type"] == "datasource"]
    assert var["query"] == "prometheus"
    for p in PANELS:
        assert all(q.expr for q in p.queries)
    titles = {p.title for p in PANELS}
    assert {"Admissions per second by outcome", "Admission latency p50 / p99",
            "Owners held: cache and watch feed", "Owner watches synced",
            "Reconcile pass duration", "Reconcile errors", "Runtime evictions by result",
            "Suppressed workloads", "Nodes per policy: in use, freeable, draining",
            "Nodes that cannot be freed, by reason", "Resource plans at admission, by outcome",
            "Resource plans blocked, by reason"} <= titles
    for raw in model["panels"]:
        if raw.get("targets"):
            assert raw["datasource"]["uid"] == "${datasource}", raw["title"]


@pytest.mark.parametrize("panel", PANELS, ids=[p.title for p in PANELS])
def test_dashboard_panel_returns_series(admitted: Observed, panel: dash.Panel) -> None:
    for q in panel.queries:
        # Grafana's $__rate_interval is at least four scrape intervals.
        assert admitted.series(dash.promql(q.expr, rate_interval="30s")), q.expr


def test_the_dashboard_renders_to_png(admitted: Observed, tmp_path: Path) -> None:
    out = tmp_path / "compactor.png"
    counts = dash.render(admitted.prom, dash.load(), out, admitted.started, time.time(),
                         step=1.0, rate_interval="30s")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(counts) == {p.title for p in PANELS} and all(counts.values()), counts


# --- what kubectl get shows ------------------------------------------------------------

def test_kubectl_get_shows_enabled_scheduler_workloads_and_valid(admitted: Observed) -> None:
    o = admitted

    def table() -> dict[str, list[Any]] | None:
        got = o.kube.request("GET", path("clustercompactionpolicies", api=API), headers={
            "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        cols = [c["name"] for c in got["columnDefinitions"]]
        rows = {r["cells"][0]: dict(zip(cols, r["cells"], strict=True)) for r in got["rows"]}
        valid, invalid = rows.get(o.policy), rows.get(o.invalid_policy)
        if valid is None or invalid is None or invalid["Valid"] != "False" or \
                valid["Workloads"] != 1:
            return None
        return {"cols": cols, "valid": list(valid.values()), "invalid": list(invalid.values())}

    got = wait_for("the controller's status in the table", table, timeout=60)
    assert got["cols"] == ["Name", "Enabled", "Scheduler", "Descheduler", "Workloads", "Valid",
                           "Nodes", "Freeable", "Draining", "Age"]
    assert got["valid"][:6] == [o.policy, True, EXTERNAL, True, 1, "True"]
    # Invalid: no scheduler resolved, nothing managed.
    assert got["invalid"][:6] == [o.invalid_policy, True, "", True, 0, "False"]
    # kubectl prints the same Table.
    out = subprocess.run([str(o.cluster.bin / "kubectl"), f"--kubeconfig={o.cluster.kubeconfig}",
                          "get", "ccp", o.policy, o.invalid_policy], capture_output=True,
                         text=True, timeout=60, check=True).stdout.splitlines()
    header = out[0]
    assert header.split() == ["NAME", "ENABLED", "SCHEDULER", "DESCHEDULER", "WORKLOADS",
                              "VALID", "NODES", "FREEABLE", "DRAINING", "AGE"]
    starts = [header.index(c) for c in header.split()] + [None]

    def cells(line: str) -> list[str]:
        return [line[a:b].strip() for a, b in zip(starts, starts[1:], strict=False)]
    rows = {cells(line)[0]: cells(line)[1:6] for line in out[1:]}
    assert rows[o.policy] == ["true", EXTERNAL, "true", "1", "True"]
    assert rows[o.invalid_policy] == ["true", "", "true", "0", "False"]
