"""The faults of a chaos run, one function each: inject, lift, and say in the window when the
fault ended (time to converge counts from there)."""

from __future__ import annotations

import base64
import concurrent.futures
import datetime
import threading
import time
import uuid

import httpx

from compaction import names
from localcluster.chaos.audit import evictions
from localcluster.chaos.harness import CONTROLLER_USER, WEBHOOK_OFF, Chaos
from localcluster.chaos.scenario import policy_spec
from localcluster.chaos.stranding import Stranding
from localcluster.cluster.kube import ApiError, Kube, path, wait_for
from localcluster.cluster.stack import SCHEDULER_DOWN_AFTER, stranded_bound

DOWN = 5.0  # seconds a killed process stays down before it is started again


def baseline(chaos: Chaos, seconds: float = 20.0) -> None:
    with chaos.window("none (the same load, no fault)") as w:
        time.sleep(seconds)
        w.recovered()


def webhook_kill(chaos: Chaos, failure_policy: str = "Ignore") -> None:
    """The only webhook replica killed with SIGKILL, started again after DOWN seconds."""
    label = "webhook kill -9, restart" + (f" (failurePolicy {failure_policy})"
                                          if failure_policy != "Ignore" else "")
    if failure_policy != "Ignore":
        chaos.stack.register_webhook(chaos.balancer.port, failure_policy, WEBHOOK_OFF, 3)
        time.sleep(2)  # the API server picks the change up asynchronously
    try:
        with chaos.window(label) as w:
            killed = time.monotonic()
            chaos.kill_webhook("webhook-a")
            _burst(chaos)
            time.sleep(DOWN)
            chaos.restart_webhook("webhook-a")
            w.recovered()
            w.note = f"down {time.monotonic() - killed:.1f} s"
    finally:
        if failure_policy != "Ignore":
            chaos.stack.register_webhook(chaos.balancer.port, "Ignore", WEBHOOK_OFF, 3)


def replica_kill(chaos: Chaos) -> None:
    """Two webhook replicas behind the balancer, one killed: nothing to repair, so the time to
    converge counts from the kill; the killed one comes back afterwards."""
    if "webhook-b" not in chaos.webhooks:
        chaos.add_webhook("webhook-b")
        time.sleep(2)
    with chaos.window("one of two webhooks kill -9 (balancer)") as w:
        chaos.kill_webhook("webhook-a")
        w.recovered()
        _burst(chaos)
        w.note = "the other serves alone while the run converges"
    chaos.restart_webhook("webhook-a")


def _burst(chaos: Chaos) -> None:
    """Pods created while the fault lasts, whatever the random churn does meanwhile."""
    assert chaos.churn is not None
    chaos.churn.burst()


def _count_labelled(chaos: Chaos, namespace: str, policy: str) -> int:
    return len(chaos.kube.items(path("pods", namespace), f"{names.POLICY_LABEL}={policy}"))


def controller_kill_labelling(chaos: Chaos) -> None:
    """The active controller killed while it labels a namespace's Pods in place (a policy
    newly covering them); the standby must finish."""
    total = chaos.config.bulk_workloads * chaos.config.bulk_replicas
    leader = chaos.leader()
    with chaos.window("active controller kill -9 during bulk Pod labelling",
                      {"bulk": False}) as w:
        chaos.apply_policy("bulk", policy_spec("bulk", False, False))
        labelled = wait_for("labelling under way",
                            lambda: n if (n := _count_labelled(chaos, "bulk", "bulk")) >=
                            total // 10 else None, timeout=60, interval=0.02)
        w.killed = (leader, chaos.kill_controller(leader))
        w.recovered()
        w.note = f"killed with {labelled} of {total} Pods labelled"
    chaos.restart_controller(leader)


def controller_kill_evicting(chaos: Chaos) -> None:
    """The active controller killed in the middle of the runtime hook's evictions (a policy
    with setLabelsByEviction newly covering Pods placed without it)."""
    total = chaos.config.hook_workloads * chaos.config.hook_replicas
    leader = chaos.leader()
    with chaos.window("active controller kill -9 during runtime-hook evictions",
                      {"hook": True}) as w:
        started = w.started
        chaos.apply_policy("hook", policy_spec("hook", True, False))

        def evicted() -> int | None:
            done = [e for e in evictions(chaos.audit.between(started, _now()))
                    if e.ok and e.user == CONTROLLER_USER and e.namespace == "hook"]
            return len(done) if len(done) >= 2 else None
        count = wait_for("the runtime hook evicting", evicted, timeout=90, interval=0.05)
        w.killed = (leader, chaos.kill_controller(leader))
        w.recovered()
        w.note = f"killed after {count} of {total} evictions"
    chaos.restart_controller(leader)


def apiserver_restart(chaos: Chaos) -> None:
    with chaos.window("kube-apiserver restart") as w:
        _burst(chaos)  # the Deployment controller creates its Pods across the restart
        started = time.monotonic()
        chaos.cluster.restart("kube-apiserver")
        w.recovered()
        w.note = f"down {time.monotonic() - started:.1f} s"


def etcd_restart(chaos: Chaos) -> None:
    with chaos.window("etcd restart") as w:
        _burst(chaos)
        started = time.monotonic()
        chaos.cluster.restart("etcd")
        wait_for("the API server ready again",
                 lambda: chaos.kube.raw("/readyz").status_code == 200, timeout=60)
        w.recovered()
        w.note = f"unavailable {time.monotonic() - started:.1f} s"


def latency(chaos: Chaos, seconds: float, hold: float = 20.0) -> None:
    """Every answer from the API server to the webhooks ``seconds`` late, for ``hold``
    seconds; a rollout at the start makes a ReplicaSet the webhook must look up."""
    with chaos.window(f"API server {seconds:g} s slower for the webhook") as w:
        chaos.webhook_api.delay = seconds
        _rollout(chaos)
        time.sleep(hold)
        chaos.webhook_api.delay = 0.0
        w.recovered()
        w.note = f"for {hold:.0f} s"


def _rollout(chaos: Chaos) -> None:
    ns, name = chaos.churned[0].split("/")
    chaos.kube.patch(path("deployments", ns, name), {"spec": {"template": {"metadata": {
        "annotations": {"chaos.compactor.test/fault": uuid.uuid4().hex[:6]}}}}})


def _compact_etcd(chaos: Chaos) -> int:
    url = chaos.cluster.etcd_url
    revision = int(httpx.post(f"{url}/v3/kv/range", json={
        "key": base64.b64encode(b"/").decode()}).json()["header"]["revision"])
    httpx.post(f"{url}/v3/kv/compaction", json={"revision": str(revision), "physical": True})
    return revision


def watch_expired(chaos: Chaos) -> None:
    """Every connection of the webhooks and controllers to the API server cut, etcd compacted
    meanwhile: the ReplicaSet watches (served from etcd, not from a watch cache) resume from
    a compacted revision and get 410 Gone from the real API server."""
    expired = "compactor_owner_watch_restarts_total"
    before = chaos.webhook_value(expired, {"reason": "expired"})
    with chaos.window("watch expired (410)") as w:
        cut = chaos.webhook_api.cut(refuse_for=2.0) + chaos.controller_api.cut(refuse_for=2.0)
        _rollout(chaos)  # something changes while they are away
        revision = _compact_etcd(chaos)
        time.sleep(2.5)
        w.recovered()
        after = wait_for("the webhook relisting", lambda: v if (v := chaos.webhook_value(
            expired, {"reason": "expired"})) > before else None, timeout=30)
        relists = len([e for e in chaos.audit.between(w.started, _now())
                       if e.verb == "list" and e.user == CONTROLLER_USER
                       and e.resource == "replicasets"])
        w.note = (f"{cut} connections cut, etcd compacted at revision {revision}; webhook "
                  f"watches expired {after - before:.0f}, controller ReplicaSet relists "
                  f"{relists}")


def cache_overflow(chaos: Chaos, owners: int = 1000) -> None:
    """Admissions for Pods of ``owners`` distinct ReplicaSets nobody knows (dry runs through
    the API server), past the webhooks' owner-cache size, while the real load goes on."""
    size = chaos.config.webhook_cache_size
    gets = "compactor_owner_api_requests_total"
    before = chaos.webhook_value(gets)
    peak = [0.0]
    local = threading.local()
    clients: list[Kube] = []

    def admit(i: int) -> None:
        if not hasattr(local, "kube"):
            local.kube = chaos.cluster.client()
            clients.append(local.kube)
        owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"ghost-{i}",
                 "uid": str(uuid.uuid4()), "controller": True}
        try:
            local.kube.create(path("pods", "chaos"), {
                "metadata": {"generateName": f"ghost-{i}-", "ownerReferences": [owner]},
                "spec": {"containers": [{"name": "c", "image": "p"}]}}, dry_run=True)
        except ApiError:
            pass
        if i % 50 == 0:
            peak[0] = max(peak[0], chaos.webhook_value("compactor_owner_cache_entries"))
    with chaos.window("owner cache filled past its size") as w:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(admit, range(owners)))
        for kube in clients:
            kube.close()
        w.recovered()
        w.note = (f"{owners} unknown owners, cache of {size} per replica: at most "
                  f"{peak[0]:.0f} entries held in all, "
                  f"{chaos.webhook_value(gets) - before:.0f} GETs")


def scheduler_gone(chaos: Chaos, how: str) -> None:
    """The compaction scheduler gone while the load goes on: ``kill`` (its process killed
    and its Pod unready, as an image that cannot be pulled leaves it, until Compactor falls
    back and replaces what waits on it), ``scale`` (its Deployment scaled to 0: the
    controller puts it back), ``disable`` (its process down while Pods wait on it, and the
    policy of those Pods disabled meanwhile). No Pod may wait on it past the bound."""
    assert chaos.restarter is not None
    sched = chaos.cluster.process(names.MANAGED_SCHEDULER)
    bound = stranded_bound(chaos.grace)
    label = {"kill": "compaction scheduler kill -9 and its Pod unready",
             "scale": "compaction scheduler Deployment scaled to 0",
             "disable": "compaction scheduler down, the policy of its waiting Pods "
                        "disabled"}[how]
    deployment = path("deployments", names.INSTALL_NAMESPACE, names.MANAGED_SCHEDULER)
    with Stranding(chaos.kube, ("chaos", "hook", "bulk")) as stranding, \
            chaos.window(label) as w:
        chaos.restarter.held.add(sched.name)
        try:
            sched.stop()
            if how == "kill":
                chaos.stack.scheduler_pods_unready(True)
                _burst(chaos)
                wait_for("the fallback", lambda: chaos.controller_value(
                    "compactor_scheduler_routing", {"state": "Unavailable"}) == 1,
                    timeout=SCHEDULER_DOWN_AFTER + 30)
                _burst(chaos)  # these go to the default scheduler
                time.sleep(bound)  # what waited on it is replaced meanwhile
                chaos.stack.scheduler_pods_unready(False)
            elif how == "scale":
                chaos.kube.patch(deployment, {"spec": {"replicas": 0}})
                _burst(chaos)
                wait_for("the controller restoring it", lambda: (chaos.kube.get(
                    deployment).get("status") or {}).get("availableReplicas", 0) >= 1,
                    timeout=60)
            else:
                _burst(chaos)
                time.sleep(3)  # Pods created meanwhile wait on the scheduler
                chaos.apply_policy("chaos", {**policy_spec("chaos", True, True, pool="churn"),
                                             "enabled": False})
                time.sleep(SCHEDULER_DOWN_AFTER)
                chaos.apply_policy("chaos", policy_spec("chaos", True, True, pool="churn"))
        finally:
            chaos.restarter.held.discard(sched.name)
            if not sched.running():
                sched.start()
        w.recovered()
        w.stranded = len(stranding.over(bound))
        w.note = stranding.summary(bound)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
