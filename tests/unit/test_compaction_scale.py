"""The compaction-at-scale bench: its scenario scales the demo's mix, its limits grow with the
cluster, and its verdicts judge each target as it is stated."""

from __future__ import annotations

from dataclasses import replace

import pytest

from localcluster.bench import compaction_scale
from localcluster.demo.scenario import standard
from tests.unit.test_measure_repeats import BASE


def test_the_demo_mix_is_scaled_to_the_node_count() -> None:
    demo, big = standard(), compaction_scale.scenario(100)
    assert big.nodes == 100 and [a.name for a in big.apps] == [a.name for a in demo.apps]
    for small, large in zip(demo.apps, big.apps, strict=True):
        assert large.replicas == round(small.replicas * 100 / 12)
        assert (large.cpu, large.memory, large.kind) == (small.cpu, small.memory, small.kind)


@pytest.mark.parametrize(("nodes", "per_run"), [(12, 1), (100, 10), (9, 1)])
def test_limits_grow_with_the_cluster_one_eviction_per_node_and_run(
        nodes: int, per_run: int) -> None:
    spec = compaction_scale.overrides(compaction_scale.scenario(nodes))
    d = spec["descheduler"]
    assert spec["setLabelsByEviction"] is False
    assert d["highNodeUtilization"]["thresholds"] == {"cpu": 100, "memory": 100, "pods": 100}
    assert (d["maxDrainingNodes"], d["maxNoOfPodsToEvictTotal"],
            d["maxNoOfPodsToEvictPerNamespace"], d["maxNoOfPodsToEvictPerNode"]) == (
        per_run, per_run, per_run, 1)


def test_verdicts_allow_one_node_over_the_packing_and_no_futile_eviction() -> None:
    ok = replace(BASE, nodes_before=100, nodes_after=52, ffd_packing=51)
    over = replace(ok, nodes_after=53)
    futile = replace(ok, late_evictions=1)
    judged = {name: passed for name, passed, _ in compaction_scale.verdicts(
        [(100, ok)])}
    assert all(judged.values()) and len(judged) == 3
    assert [p for _, p, _ in compaction_scale.verdicts([(100, over)])] == [False, True, True]
    assert [p for _, p, _ in compaction_scale.verdicts([(100, futile)])] == [True, False, True]


def test_the_table_reports_evictions_per_freed_node() -> None:
    row = compaction_scale.table([(100, replace(BASE, nodes_before=100, nodes_after=50,
                                                descheduler_evictions=125))]).splitlines()[2]
    assert row == "| 100 | 50 | 6 | 7 | 5 | 0 | 125 | 2.5 | 0, 0 | 21 s |"
