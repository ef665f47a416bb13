"""The controller's probes against the real API server: two replicas, one leading, are ready
once their caches have synced and alive while their pass loops come round; when both loops
stall (the fault setting), /livez fails on the leader and the standby alike, and each says
why in its log. The kubelet's restart on that failure is proven on the real node
(tests/node/test_install.py)."""

from __future__ import annotations

from pathlib import Path

import httpx

from compaction import names
from localcluster import Cluster, Kube
from localcluster.cluster import scrape
from localcluster.cluster.kube import path, wait_for
from localcluster.cluster.stack import CompactorStack, RunningController

# Long enough for one of the two to take the Lease and pass once; the bound is the shortest
# the settings take (an idle loop comes round every 6 s).
STALL_AFTER, BOUND = 20.0, 10.0


def _get(replica: RunningController, what: str) -> httpx.Response:
    return httpx.get(f"http://127.0.0.1:{replica.metrics_port}{what}", timeout=5)


def _holder(kube: Kube) -> str | None:
    lease = kube.find(path("leases", names.INSTALL_NAMESPACE, "compactor-controller",
                           api="apis/coordination.k8s.io/v1"))
    return str((lease or {}).get("spec", {}).get("holderIdentity") or "") or None


def test_leader_and_standby_fail_liveness_when_their_loop_stalls(
        cluster: Cluster, kube: Kube, tmp_path: Path) -> None:
    stack = CompactorStack(cluster, kube, tmp_path)
    stack.install()
    fault = {"COMPACTOR_CONTROLLER_FAULT_STALL_AFTER_SECONDS": str(STALL_AFTER),
             "COMPACTOR_CONTROLLER_STALLED_AFTER_SECONDS": str(BOUND)}
    replicas = [stack.start_controller_replica(f"probes-{i}", extra_env=fault)
                for i in (1, 2)]
    try:
        ids = {r.identity for r in replicas}
        leader = wait_for("one of the two leading", lambda: (
            lambda h: h if h in ids else None)(_holder(kube)), STALL_AFTER - 5, 0.5)
        for r in replicas:
            wait_for(f"{r.identity} ready", lambda r=r: _get(  # type: ignore[misc]
                r, "/readyz").status_code == 200 or None, 20, 0.5)
            assert _get(r, "/readyz").text == "caches synced\n"
            assert _get(r, "/livez").status_code == 200
        leading = {r.identity: scrape.sample(_get(r, "/metrics").text,
                                             "compactor_controller_leader") for r in replicas}
        assert leading == {i: 1.0 if i == leader else 0.0 for i in ids}

        for r in replicas:
            live = wait_for(f"{r.identity}'s liveness failing", lambda r=r: (  # type: ignore[misc]
                lambda a: a if a.status_code == 503 else None)(_get(r, "/livez")),
                STALL_AFTER + BOUND + 20, 0.5)
            assert live.text.startswith("the pass loop has not come round for "), live.text
            assert live.text.endswith(f"(bound {BOUND:.0f} s)\n"), live.text
            log = r.process.log.read_text()
            assert "the pass loop stops here" in log
            assert "liveness probe failed: the pass loop has not come round" in log
            # Still ready: its caches are synced, only its loop is stuck.
            assert _get(r, "/readyz").status_code == 200
    finally:
        for r in replicas:
            r.process.stop()
