"""A reduced `make chaos`: the whole stack on a cluster of its own, Deployments scaled all the
time, then the active controller killed in the middle of the runtime hook's evictions and the
API server restarted. What each cost is counted from the API server's audit log and the
harness's own Pod watch (localcluster/chaos/reliability.py), and must be nothing: no creation
failed, no eviction twice, none past a limit, no suppression state lost, convergence within
the bound, the standby leading within its Lease. Then the services' logs (at debug level)
are searched for the secrets planted in the run.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from compaction import names
from localcluster.chaos import faults
from localcluster.chaos.harness import LEASE_SECONDS, Chaos, ChaosConfig
from localcluster.chaos.reliability import FaultReport, leaks, table
from localcluster.cluster.control_plane import Cluster, ClusterConfig
from localcluster.cluster.kube import path

CONFIG = ChaosConfig(churn_nodes=2, static_nodes=1, churned=2, low=1, high=4,
                     churn_interval=2.0, rollout_every=20.0, hook_workloads=2, hook_replicas=2,
                     bulk_workloads=1, bulk_replicas=10, converge_timeout=60.0,
                     secrets={"env": f"env-{secrets.token_hex(12)}",
                              "annotation": f"tok-{secrets.token_hex(12)}"},
                     log_level="debug")


@pytest.fixture(scope="module")
def chaos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chaos]:
    workdir = tmp_path_factory.mktemp("chaos")
    with Cluster(ClusterConfig(workdir=workdir / "cluster", audit=True)) as cluster:
        run = Chaos(cluster, workdir / "compactor", CONFIG)
        try:
            run.start()
            yield run
        finally:
            run.stop()


@pytest.fixture(autouse=True)
def _cluster_for_logs(request: pytest.FixtureRequest) -> Cluster | None:
    if "chaos" in request.fixturenames:
        return request.getfixturevalue("chaos").cluster  # type: ignore[no-any-return]
    return None


def _nothing_lost(report: FaultReport) -> None:
    figures = table([report])
    assert report.pods_created > 0, figures  # the load did go on
    assert report.creations_failed == 0, figures
    assert report.duplicate_evictions == 0, figures
    assert report.evictions_over_limits == 0, figures
    assert report.suppression_lost == 0, figures
    assert report.converge_s is not None, figures


def test_the_active_controller_killed_mid_evictions_the_standby_finishes(chaos: Chaos) -> None:
    faults.controller_kill_evicting(chaos)
    report = chaos.reports[-1]
    _nothing_lost(report)
    # The Lease expires LEASE_SECONDS after the last renewal; the standby asks every third
    # of it, so it leads at most a third after expiry (plus a pass's worth of slack).
    assert report.takeover_s is not None, table([report])
    assert report.takeover_s <= LEASE_SECONDS * 4 / 3 + 3, table([report])


def test_an_api_server_restart_loses_nothing_and_every_process_lives_on(chaos: Chaos) -> None:
    faults.apiserver_restart(chaos)
    _nothing_lost(chaos.reports[-1])
    assert all(r.process.running() for r in chaos.controllers.values())
    assert all(proc.running() for proc, _ in chaos.webhooks.values())


def test_the_compaction_scheduler_gone_strands_no_pod(chaos: Chaos) -> None:
    # Its process killed and its Pod unready: new Pods go to the default scheduler, those
    # left waiting on it are replaced, and it is routed to again once back.
    faults.scheduler_gone(chaos, "kill")
    report = chaos.reports[-1]
    _nothing_lost(report)
    assert report.stranded == 0, table([report])


def test_compactors_own_pods_never_hold_a_pool_node(chaos: Chaos) -> None:
    # The harness's premise: a Pod of Compactor's namespace (the scheduler's, recreated by the
    # fault above, or a descheduler Job's) on a pool node would keep the plan from freeing it,
    # and the hook from replacing the Pods there.
    placed = {p["metadata"]["name"]: p["spec"].get("nodeName")
              for p in chaos.kube.items(path("pods", names.INSTALL_NAMESPACE))}
    assert any(name.startswith(names.MANAGED_SCHEDULER) for name in placed), placed
    assert set(placed.values()) <= {"system-0", None}, placed


def test_no_planted_secret_reaches_a_log(chaos: Chaos) -> None:
    found, logs = chaos.secrets_to_find(), chaos.service_logs()
    assert {"env", "annotation"} <= set(found) and any(k.startswith("token") for k in found)
    assert any(name.startswith("webhook") for name in logs)
    assert sum(name.startswith("controller") for name in logs) == 2
    assert leaks(found, logs) == []
