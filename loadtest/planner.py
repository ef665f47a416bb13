"""The planner's speed on synthetic clusters of 100 and 1,000 nodes with about 30 Pods each,
the demo's mix of workloads spread as the default scheduler spreads them, plus a few Pods that
block their nodes. Pure code, so timed in-process: the median of interleaved repeats, with its
spread, of two figures from one call of the pass's ``plan()``:

- the plan: ``drain_memo.reuse_or_plan`` with nothing to reuse, which simulates every policy's
  drains and digests its inputs for the next pass. Targets: under 50 ms at 100 nodes, under
  1 s at 1,000;
- the whole pass's ``plan()`` around it (membership, labels, the drain plan, own objects,
  status): its first pass, every Pod still to be labelled, is the worst one. Shown, not judged.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from compaction import names
from compaction.workload import WorkloadType
from controller import drain_memo
from controller.plan import PlanSettings, plan
from controller.runtime import RuntimeSettings
from controller.scheduling import parse_placement
from controller.snapshot import NodeInfo, OwnerInfo, PodInfo, Snapshot, parse_policy_object
from controller.workloads import WorkloadObject, workload_object

GI = 2**30 * 1000
# (namespace, name, replicas per 100 nodes, cpu millicores, memory MiB), as bench-e2e's mix.
MIX = (("production", "web", 1000, 50, 128), ("production", "api", 700, 100, 256),
       ("production", "cache", 100, 250, 512), ("batch", "worker", 700, 100, 256),
       ("batch", "report", 400, 50, 128))
TARGETS = {100: 0.05, 1000: 1.0}
NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)


# What the API server's DefaultTolerationSeconds plugin gives every Pod.
DEFAULT_TOLERATIONS = parse_placement({"tolerations": [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300}]})


def cluster(nodes: int) -> Snapshot:
    """``nodes`` nodes of 4 CPU, 16 GiB and 110 Pods, the mix spread round-robin, a node
    agent on each node, and one pinned (safe-to-evict false) Pod per 10 nodes; every Pod
    with the default tolerations, as a real one has."""
    node_names = [f"node-{i:04d}" for i in range(nodes)]
    infos = tuple(NodeInfo(n, {"kubernetes.io/hostname": n}, {
        "cpu": 4000_000, "memory": 16 * GI, "pods": 110_000}) for n in node_names)
    workloads: list[WorkloadObject] = []
    owners: list[OwnerInfo] = []
    pods: list[PodInfo] = []
    at = 0
    for ns, app, per_100, cpu, mib in MIX:
        w = workload_object(WorkloadType.DEPLOYMENT, {"metadata": {
            "namespace": ns, "name": app, "uid": f"uid-{app}"},
            "spec": {"replicas": per_100 * nodes // 100}}, {})
        assert w is not None
        workloads.append(w)
        owners.append(OwnerInfo("ReplicaSet", ns, f"{app}-1", ("Deployment", app), {}))
        for i in range(per_100 * nodes // 100):
            pods.append(PodInfo(ns, f"{app}-{i}", f"{app}-{i}", {"app": app}, {},
                                ("ReplicaSet", f"{app}-1"), node_name=node_names[at % nodes],
                                phase="Running", ready=True,
                                requests={"cpu": cpu * 1000, "memory": mib * 2**20 * 1000},
                                placement=DEFAULT_TOLERATIONS))
            at += 1
    for i, n in enumerate(node_names):
        pods.append(PodInfo("production", f"agent-{i}", f"agent-{i}", {}, {},
                            ("DaemonSet", "agent"), node_name=n, phase="Running", ready=True,
                            requests={"cpu": 50_000, "memory": 64 * 2**20 * 1000}))
        if i % 10 == 0:
            pods.append(PodInfo("production", f"pinned-{i}", f"pinned-{i}", {}, {
                names.SAFE_TO_EVICT_ANNOTATION: "false"},
                ("ReplicaSet", "web-1"), node_name=n, phase="Running", ready=True,
                requests={"cpu": 100_000, "memory": 128 * 2**20 * 1000}))
    policy = parse_policy_object({
        "apiVersion": names.API_VERSION, "kind": names.POLICY_KIND,
        "metadata": {"name": "bench", "uid": "u", "generation": 1,
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"scope": {"namespaceSelector": {"operator": "In",
                                                 "values": ["production", "batch"]}},
                 "descheduler": {"highNodeUtilization": {
                     "thresholds": {"cpu": 65, "memory": 65, "pods": 65}}}}})
    return Snapshot(policies=(policy,), nodes=infos, workloads=tuple(workloads),
                    owners=tuple(owners), pods=tuple(pods), cluster_version="v1.36.3")


def _spread(values: Sequence[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


@dataclass(frozen=True)
class Timing:
    nodes: int
    pods: int
    plan: tuple[float, float, float]  # median, min, max of the drain plan (seconds)
    whole: tuple[float, float, float]  # the same of the whole pass's plan()
    freeable: int

    @property
    def passed(self) -> bool:
        return self.plan[0] < TARGETS[self.nodes]


@contextlib.contextmanager
def _timing_the_planner(into: list[float]) -> Iterator[None]:
    """The pass calls ``drain_memo.reuse_or_plan`` once: time that call where it is made."""
    original: Callable[..., Any] = drain_memo.reuse_or_plan

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            into.append(time.perf_counter() - started)
    drain_memo.reuse_or_plan = timed
    try:
        yield
    finally:
        drain_memo.reuse_or_plan = original


def measure(sizes: Sequence[int] = (100, 1000), repeats: int = 9) -> list[Timing]:
    snapshots = {n: cluster(n) for n in sizes}
    settings = PlanSettings(RuntimeSettings())
    whole: dict[int, list[float]] = {n: [] for n in sizes}
    plans: dict[int, list[float]] = {n: [] for n in sizes}
    freeable: dict[int, int] = {}
    for _ in range(repeats):  # interleaved: A B A B ..., so drift hits both alike
        for n in sizes:
            with _timing_the_planner(plans[n]):
                started = time.perf_counter()
                result = plan(snapshots[n], settings, NOW)  # an empty memory: nothing reused
                whole[n].append(time.perf_counter() - started)
            freeable[n] = len(result.drains[0].freeable)
    return [Timing(n, len(snapshots[n].pods), _spread(plans[n]), _spread(whole[n]),
                   freeable[n]) for n in sizes]


def _ms(figures: tuple[float, float, float]) -> str:
    median, low, high = (f * 1000 for f in figures)
    return f"{median:.0f} ms ({low:.0f} – {high:.0f})"


def table(timings: Sequence[Timing]) -> str:
    rows = ["| nodes | Pods | the plan: median (min – max) | target | | whole pass plan(): "
            "median (min – max) | nodes freeable |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for t in timings:
        rows.append(f"| {t.nodes} | {t.pods} | {_ms(t.plan)} | "
                    f"< {TARGETS[t.nodes] * 1000:.0f} ms | {'PASS' if t.passed else 'FAIL'} | "
                    f"{_ms(t.whole)} | {t.freeable} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    timings = measure(repeats=args.repeats)
    print(table(timings))
    if not all(t.passed for t in timings):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
