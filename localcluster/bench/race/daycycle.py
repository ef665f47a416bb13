"""A day in the life: compressed daily cycles on the same restored start. Each cycle raises
the load (every app to its peak), rolls two Deployments, runs a burst of Jobs, then lets the
load fall back to the start's replicas. ``plan`` is the schedule (pure); ``apply`` does one
action; ``windows`` cuts a run's timeline into its cycles, so that node-hours and evictions
are reported per cycle.

kwok completes a Job's Pods the moment they run, so a burst's Pods are annotated for kwok to
leave alone: they hold their requests, bound, until the harness deletes their Jobs at the
burst's end, as Jobs that ran that long would.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from localcluster.bench.race.restore import PAUSE
from localcluster.bench.race.start import Start
from localcluster.bench.race.timeline import Eviction, Sample
from localcluster.cluster.control_plane import MANUAL_STATUS
from localcluster.cluster.kube import ApiError, Kube, path

BURST_NAMESPACE: Final = "batch"
# The parts of a cycle, as shares of its length.
RISE, ROLL, BURST, BURST_END, FALL = 0.0, 0.25, 0.35, 0.5, 0.6


class Kind(enum.StrEnum):
    SCALE = "scale"
    ROLL = "roll"
    JOBS = "jobs"
    JOBS_DONE = "jobs-done"


@dataclass(frozen=True)
class Action:
    at: float  # seconds from the first cycle's start
    kind: Kind
    target: str  # a workload key, or the burst's name
    value: int  # replicas, a rollout's generation, or the burst's Jobs


def plan(start: Start, cycles: int, length: float, seed: int) -> list[Action]:
    """Every action of ``cycles`` cycles of ``length`` seconds, in time order."""
    rng = random.Random(f"day-{seed}")
    apps = [w for w in start.workloads if w.name.startswith("app-")]
    jobs = max(2, len(start.nodes) // 2)
    out: list[Action] = []
    for c in range(cycles):
        t = c * length
        out += [Action(t + RISE * length, Kind.SCALE, w.key, w.peak) for w in apps]
        out += [Action(t + ROLL * length, Kind.ROLL, w.key, c + 1)
                for w in rng.sample(apps, min(2, len(apps)))]
        out.append(Action(t + BURST * length, Kind.JOBS, f"burst-{c}", jobs))
        out.append(Action(t + BURST_END * length, Kind.JOBS_DONE, f"burst-{c}", jobs))
        out += [Action(t + FALL * length, Kind.SCALE, w.key, w.replicas) for w in apps]
    return sorted(out, key=lambda a: a.at)


def apply(kube: Kube, action: Action) -> None:
    if action.kind is Kind.SCALE:
        ns, name = action.target.split("/")
        kube.patch(path("deployments", ns, name, sub="scale"),
                   {"spec": {"replicas": action.value}})
    elif action.kind is Kind.ROLL:
        ns, name = action.target.split("/")
        kube.patch(path("deployments", ns, name), {"spec": {"template": {"metadata": {
            "annotations": {"race.compactor.dev/rollout": str(action.value)}}}}})
    elif action.kind is Kind.JOBS:
        for i in range(action.value):
            kube.create(path("jobs", BURST_NAMESPACE), _job(f"{action.target}-{i}"))
    else:  # a Job's default propagation orphans its Pods: ask for them to go too
        for i in range(action.value):
            try:
                kube.request("DELETE", path("jobs", BURST_NAMESPACE, f"{action.target}-{i}"),
                             {"propagationPolicy": "Background"})
            except ApiError as e:
                if e.status != 404:
                    raise


def _job(name: str) -> dict[str, object]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {
                "metadata": {"labels": {"app": "burst"},
                             "annotations": {MANUAL_STATUS: "manual"}},
                "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "job", "image": PAUSE, "resources": {
                             "requests": {"cpu": "1", "memory": "2Gi"}}}]}}}}


def windows(samples: Sequence[Sample], evictions: Sequence[Eviction], cycles: int,
            length: float) -> list[tuple[list[Sample], list[Eviction]]]:
    """The timeline cut into its cycles, each re-timed from its own start; a cycle's first
    sample is the last one before it, so that its nodes count from its first second."""
    out = []
    for c in range(cycles):
        lo, hi = c * length, (c + 1) * length
        before = [s for s in samples if s.t <= lo][-1:]
        inside = [s for s in samples if lo < s.t < hi]
        out.append(([replace(s, t=max(0.0, s.t - lo)) for s in (*before, *inside)],
                    [replace(e, t=e.t - lo) for e in evictions if lo <= e.t < hi]))
    return out
