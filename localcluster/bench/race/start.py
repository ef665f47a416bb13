"""Paired starts: one post-drop state per seed, the same for every contender.

``seeded`` computes the state (pure): the nodes Karpenter made for the spike (one shape, or
on-demand linux/amd64 types of the kwok provider's catalogue), the peak load spread the way the
default scheduler spreads it (least allocated first, replicas of a workload apart), then the
drop, each app scaled to a seeded 30 to 70 % with the replicas it loses picked at random.
``restore`` rebuilds that state on a fresh cluster: Karpenter launches the same instance types,
the workloads are created with no scheduler running and each Pod is bound to its recorded node.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from localcluster.bench.race.contract import (
    GUARDED,
    Protection,
    Variant,
    app_budget,
)

SIZES: Final = (0.25, 0.5, 0.75, 1.0)  # CPU of an app's replica; memory 2 GiB a CPU
APP_NAMESPACES: Final = ("production", "batch")
# What the kwok provider keeps from each instance type for the kubelet (helpers.go).
RESERVED_MILLICPU: Final = 100
RESERVED_MI: Final = 10
ONE_SHAPE: Final = "shape-4000m-16384mi"
# The catalogue's types a 12-node start draws from: 4 and 8 CPUs of its three families.
CATALOGUE_START: Final = ("c-4x-amd64-linux", "s-4x-amd64-linux", "m-4x-amd64-linux",
                          "s-8x-amd64-linux")


@dataclass(frozen=True)
class InstanceType:
    name: str
    cpu: int  # allocatable millicores
    memory: int  # allocatable MiB
    pods: int
    price: float  # dollars an hour, on demand


@dataclass(frozen=True)
class Workload:
    namespace: str
    name: str
    kind: str
    replicas: int  # after the drop
    peak: int
    cpu: int  # millicores a replica
    memory: int  # MiB a replica
    protection: Protection
    max_unavailable: str | None = None
    annotated: bool = False
    priority_class: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Start:
    seed: int
    variant: Variant
    catalogue: str  # "one-shape" or "kwok"
    nodes: tuple[InstanceType, ...]  # node i's type
    workloads: tuple[Workload, ...]
    # Per workload key, the node index of each replica after the drop.
    placement: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def from_json(text: str) -> Start:
        d = json.loads(text)
        return Start(d["seed"], Variant(d["variant"]), d["catalogue"],
                     tuple(InstanceType(**n) for n in d["nodes"]),
                     tuple(Workload(**{**w, "protection": Protection(w["protection"])})
                           for w in d["workloads"]),
                     {k: tuple(v) for k, v in d["placement"].items()})


def one_shape() -> InstanceType:
    """The one type of the node-counting catalogue (allocatable 4 CPU, 16 GiB, 110 Pods)."""
    return InstanceType(ONE_SHAPE, 4000, 16384, 110, 0.2)


def catalogue_types(raw: list[dict[str, Any]]) -> dict[str, InstanceType]:
    """The kwok provider's catalogue, on-demand linux/amd64 only, as allocatable and price."""
    out = {}
    for t in raw:
        if t["architecture"] != "amd64" or t["operatingSystems"] != ["linux"]:
            continue
        prices = [o["Price"] for o in t["offerings"] if o["Available"] and any(
            r["key"] == "karpenter.sh/capacity-type" and "on-demand" in r["values"]
            for r in o["Requirements"])]
        if not prices:
            continue
        res = t["resources"]
        out[t["name"]] = InstanceType(t["name"], _millicpu(res["cpu"]) - RESERVED_MILLICPU,
                                      _mebibytes(res["memory"]) - RESERVED_MI,
                                      int(res["pods"]), min(prices))
    return out


def on_demand_catalogue(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The raw catalogue cut to on-demand linux/amd64 offerings: the file Karpenter reads."""
    keep = catalogue_types(raw)
    return [{**t, "offerings": [o for o in t["offerings"] if any(
        r["key"] == "karpenter.sh/capacity-type" and "on-demand" in r["values"]
        for r in o["Requirements"])]} for t in raw if t["name"] in keep]


def _millicpu(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def _mebibytes(q: str) -> int:
    for suffix, factor in (("Mi", 1), ("Gi", 1024), ("Ti", 1024 * 1024)):
        if q.endswith(suffix):
            return int(float(q[: -len(suffix)]) * factor)
    return int(q) // 2**20


def seeded(nodes: int, seed: int, variant: Variant = Variant.NATIVE,
           types: dict[str, InstanceType] | None = None) -> Start:
    """The post-drop state of ``seed``; ``types`` (a catalogue) draws the nodes' types from
    ``CATALOGUE_START``, else every node is ``one_shape``."""
    rng = random.Random(seed)
    if types:
        shapes = tuple(types[rng.choice(CATALOGUE_START)] for _ in range(nodes))
    else:
        shapes = (one_shape(),) * nodes
    budget = sum(s.cpu for s in shapes) * 0.55 / 1000
    apps: list[Workload] = []
    while budget > 0:
        i = len(apps)
        cpu = rng.choice(SIZES)
        peak = min(rng.randint(2, 6), max(1, math.ceil(budget / cpu)))
        apps.append(Workload(APP_NAMESPACES[i % 2], f"app-{i}", "Deployment", peak, peak,
                             int(cpu * 1000), max(256, int(cpu * 2048)), Protection.BUDGET,
                             max_unavailable=app_budget(i)))
        budget -= cpu * peak
    guarded = [Workload(g.namespace, g.name, g.kind, g.replicas, g.replicas, _millicpu(g.cpu),
                        _mebibytes(g.memory), g.protection, g.max_unavailable, g.annotated,
                        g.priority_class) for g in GUARDED]
    placed = spread(shapes, [*apps, *(g for g in guarded if g.kind != "DaemonSet")])
    dropped: list[Workload] = []
    for w in apps:
        after = max(1, round(w.peak * rng.uniform(0.3, 0.7)))
        keep = sorted(rng.sample(range(w.peak), after))
        placed[w.key] = tuple(placed[w.key][k] for k in keep)
        dropped.append(Workload(**{**asdict(w), "replicas": after}))
    return Start(seed, Variant(variant), "kwok" if types else "one-shape", shapes,
                 (*dropped, *guarded), placed)


def spread(shapes: tuple[InstanceType, ...], workloads: list[Workload]
           ) -> dict[str, tuple[int, ...]]:
    """Each replica on the feasible node with the most room left (the default scheduler's
    LeastAllocated), a node already holding a replica of the same workload last (its default
    topology spread); ties to the lower index. A DaemonSet's Pod is reserved on every node."""
    ds = [g for g in GUARDED if g.kind == "DaemonSet"]
    cpu = [s.cpu - sum(_millicpu(g.cpu) for g in ds) for s in shapes]
    mem = [s.memory - sum(_mebibytes(g.memory) for g in ds) for s in shapes]
    pods = [s.pods - len(ds) for s in shapes]
    out: dict[str, tuple[int, ...]] = {}
    for w in workloads:
        mine: Counter[int] = Counter()
        for _ in range(w.peak):
            fits = [i for i in range(len(shapes))
                    if cpu[i] >= w.cpu and mem[i] >= w.memory and pods[i] > 0]
            if not fits:
                raise ValueError(f"{w.key} does not fit the start's nodes")
            best = min(fits, key=lambda i: (mine[i], -(cpu[i] / shapes[i].cpu
                                                       + mem[i] / shapes[i].memory), i))
            cpu[best] -= w.cpu
            mem[best] -= w.memory
            pods[best] -= 1
            mine[best] += 1
            out[w.key] = (*out.get(w.key, ()), best)
    return out
