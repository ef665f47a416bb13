"""The growth benchmark's scenario and arithmetic (pure; `make bench-e2e` runs the clusters)."""

from __future__ import annotations

import math

import pytest

from localcluster import bench_e2e
from localcluster.bench_e2e import MIX, exponent, scenario


@pytest.mark.parametrize("nodes", [100, 300, 500])
def test_about_29_managed_pods_per_node_and_workloads_growing_with_the_cluster(
        nodes: int) -> None:
    s = scenario(nodes)
    managed = sum(a.replicas for a in s.apps)
    assert managed == 29 * nodes
    assert len(s.apps) == len(MIX) * nodes // 10
    assert max(a.replicas for a in s.apps) == max(a.replicas for a in MIX)
    assert len({(a.namespace, a.kind, a.name) for a in s.apps}) == len(s.apps)
    assert {a.kind for a in s.apps} == {"Deployment", "StatefulSet"}


def test_one_copy_of_the_mix_scales_its_replicas_instead() -> None:
    s = scenario(500, nodes_per_mix=500)
    assert [a.name for a in s.apps] == [a.name for a in MIX]
    assert sum(a.replicas for a in s.apps) == 29 * 500
    assert max(a.replicas for a in s.apps) == 5000


def test_the_policy_labels_without_evicting() -> None:
    assert scenario(100).policy_spec["setLabelsByEviction"] is False


@pytest.mark.parametrize(("small", "large", "k"), [
    (10.0, 30.0, 1.0), (10.0, 10.0, 0.0), (10.0, 90.0, 2.0)])
def test_growth_exponent(small: float, large: float, k: float) -> None:
    assert exponent(small, large, 100, 300) == pytest.approx(k)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan])
def test_growth_exponent_of_a_figure_that_cannot_have_one(bad: float) -> None:
    assert math.isnan(exponent(bad, 5.0, 100, 300))
    assert math.isnan(exponent(5.0, bad, 100, 300))


def test_verdict_on_labelling_time_is_judged_at_the_largest_size() -> None:
    base = bench_e2e.Figures(
        nodes=100, pods=3007, workloads_s=1, pods_s=10, pass_mean_s=0.2, pass_p99_s=0.5,
        passes_over_5s=0, plan_mean_s=0.05, plan_p99_s=0.1, controller_rss_mib=100,
        webhook_rss_mib=60, controller_rpm=17, webhook_rpm=0, apiserver_rpm=60, throttled=0,
        apf_rejected=0)
    big = bench_e2e.Figures(**{**base.__dict__, "nodes": 500, "pods": 15007, "pods_s": 61.0})
    checks = {name: ok for name, ok, _ in bench_e2e.verdicts([base, big])}
    assert checks["every Pod labelled < 60 s after a policy change at 500 nodes"] is False
    assert all(ok for name, ok in checks.items() if "every Pod labelled" not in name)
