"""Paired starts and the protection contract: the seeded state is the same for every
contender, fits its nodes, and carries the contract's words on the right Pods."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction import names
from controller.process.settings import load
from localcluster.bench.race.contract import (
    PREFER_NO_EVICTION,
    Protection,
    Variant,
    never_move_annotations,
    render_markdown,
)
from localcluster.bench.race.restore import workload_object
from localcluster.bench.race.run import SYSTEM_LABEL, SYSTEM_PLACEMENT, SYSTEM_TAINT
from localcluster.bench.race.start import (
    InstanceType,
    Start,
    catalogue_types,
    on_demand_catalogue,
    seeded,
)

RAW = [{"name": f"{fam}-{n}x-{arch}-{os}", "architecture": arch, "operatingSystems": [os],
        "resources": {"cpu": str(n), "memory": f"{n * ratio}Gi", "pods": str(16 * n)},
        "offerings": [{"Price": 0.03 * n * p, "Available": True, "Requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [ct]}]}
            for ct, p in (("spot", 0.7), ("on-demand", 1.0))]}
       for fam, ratio in (("c", 2), ("s", 4), ("m", 8)) for n in (4, 8)
       for arch in ("amd64", "arm64") for os in ("linux", "windows")]


def test_the_same_seed_is_the_same_start_and_survives_its_file() -> None:
    a, b = seeded(12, 3), seeded(12, 3)
    assert a == b
    assert Start.from_json(a.to_json()) == a
    assert seeded(12, 4) != a


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=1, max_value=10_000), st.sampled_from([6, 12, 30]))
def test_every_replica_is_placed_on_a_node_with_room(seed: int, count: int) -> None:
    start = seeded(count, seed)
    cpu: dict[int, int] = defaultdict(int)
    for w in start.workloads:
        if w.kind == "DaemonSet":
            continue
        assert len(start.placement[w.key]) == w.replicas
        for i in start.placement[w.key]:
            cpu[i] += w.cpu
    assert all(cpu[i] + 50 <= start.nodes[i].cpu for i in cpu)
    # The drop left every app at 30 to 70 % of its peak, at least one replica.
    apps = [w for w in start.workloads if w.name.startswith("app-")]
    assert apps and all(1 <= w.replicas <= w.peak for w in apps)


def test_the_catalogue_keeps_on_demand_linux_amd64_at_its_price() -> None:
    types = catalogue_types(RAW)
    assert sorted(types) == sorted(f"{f}-{n}x-amd64-linux" for f in "csm" for n in (4, 8))
    assert types["c-4x-amd64-linux"] == InstanceType("c-4x-amd64-linux", 3900, 8182, 64, 0.12)
    kept = on_demand_catalogue(RAW)
    assert all(len(t["offerings"]) == 1 for t in kept) and len(kept) == 6


def test_a_catalogue_start_draws_the_types_it_names() -> None:
    raw = [*RAW, {**RAW[0], "name": "s-8x-amd64-linux"}]
    start = seeded(12, 1, types=catalogue_types(raw))
    assert start.catalogue == "kwok"
    assert {t.name for t in start.nodes} <= {"c-4x-amd64-linux", "s-4x-amd64-linux",
                                              "m-4x-amd64-linux", "s-8x-amd64-linux"}


def test_never_move_pods_carry_each_tools_own_words_and_the_migrating_variant_one() -> None:
    native = never_move_annotations(Variant.NATIVE)
    assert native == {names.SAFE_TO_EVICT_ANNOTATION: "false",
                      names.DO_NOT_DISRUPT_ANNOTATION: "true", PREFER_NO_EVICTION: ""}
    assert never_move_annotations(Variant.CLUSTER_AUTOSCALER) == {
        names.SAFE_TO_EVICT_ANNOTATION: "false"}
    for variant, words in ((Variant.NATIVE, native),
                           (Variant.CLUSTER_AUTOSCALER, {names.SAFE_TO_EVICT_ANNOTATION: "false"})):
        start = seeded(12, 1, variant)
        by = {w.name: w for w in start.workloads}
        pinned = workload_object(by["pinned"], start)
        assert pinned["spec"]["template"]["metadata"]["annotations"] == words
        app = workload_object(by["app-0"], start)
        assert app["spec"]["template"]["metadata"]["annotations"] == {}
        holder = workload_object(by["capacity-reservation"], start)
        assert holder["spec"]["template"]["spec"]["priorityClassName"] == "overprovisioning"
        assert "replicas" not in workload_object(by["node-agent"], start)["spec"]


def test_the_start_gives_dns_a_budget_and_the_apps_realistic_ones() -> None:
    start = seeded(12, 1)
    by = {w.name: w for w in start.workloads}
    assert by["dns"].max_unavailable == "1" and by["dns"].protection is Protection.BUDGET
    assert by["payments"].max_unavailable == "0"
    assert [by[f"app-{i}"].max_unavailable for i in range(3)] == ["1", "25%", None]


def test_the_contract_renders_every_class_with_how_each_tool_is_told() -> None:
    text = render_markdown()
    for words in ("karpenter.sh/do-not-disrupt", PREFER_NO_EVICTION, "safe-to-evict",
                  "maxUnavailable: 1", "maxUnavailable: 0", "priority -10", "25%"):
        assert words in text
    assert "do-not-disrupt" not in render_markdown(Variant.CLUSTER_AUTOSCALER)


def test_compactors_own_pods_are_placed_on_the_system_node_alone() -> None:
    runtime = load(SYSTEM_PLACEMENT).runtime
    for pod_runtime in (runtime.scheduler, runtime.descheduler):
        spec = pod_runtime.pod_spec({"name": "c"}, "sa", "cm", "/m")
        assert spec["nodeSelector"] == SYSTEM_LABEL
        (toleration,) = spec["tolerations"]
        assert {k: toleration[k] for k in SYSTEM_TAINT} == SYSTEM_TAINT
    # No workload of a start tolerates it: the system node holds Compactor's Pods alone.
    start = seeded(12, 1, Variant.NATIVE)
    for w in start.workloads:
        tolerations = workload_object(w, start)["spec"]["template"]["spec"].get(
            "tolerations", [])
        assert not [t for t in tolerations if t.get("key") in (SYSTEM_TAINT["key"], None)]
