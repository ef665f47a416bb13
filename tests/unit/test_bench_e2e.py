"""The growth benchmark's scenario and arithmetic (pure; `make bench-e2e` runs the clusters)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from localcluster.bench import e2e as bench_e2e
from localcluster.bench.e2e import MIX, exponent, scenario


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


_AT_100 = bench_e2e.Figures(
    nodes=100, pods=3007, workloads_s=1, pods_s=10, pass_mean_s=0.2, pass_p99_s=0.5,
    passes_over_5s=0, plan_mean_s=0.05, plan_p99_s=0.1, controller_rss_mib=100,
    webhook_rss_mib=60, controller_rpm=14, controller_watch_rpm=0, webhook_rpm=0,
    apiserver_rpm=60, throttled=0, apf_rejected=0)


def _figures(**changes: Any) -> bench_e2e.Figures:
    return dataclasses.replace(_AT_100, **changes)


def _verdicts(*runs: bench_e2e.Figures) -> dict[str, bool]:
    return {name: ok for name, ok, _ in bench_e2e.verdicts(runs)}


def test_verdict_on_labelling_time_is_judged_at_the_largest_size() -> None:
    checks = _verdicts(_figures(), _figures(nodes=500, pods=15007, pods_s=61.0))
    assert checks["every Pod labelled < 60 s after a policy change at 500 nodes"] is False
    assert all(ok for name, ok in checks.items() if "every Pod labelled" not in name)


def test_watch_renewals_are_no_growth_in_steady_requests() -> None:
    """Each watch cache renews every 5-10 minutes: a window that caught renewals at one size
    and none at another must not read as growth, and real growth still must."""
    small = _figures()
    renewals = _figures(nodes=500, controller_rpm=19.5, controller_watch_rpm=5.5)
    grown = _figures(nodes=500, controller_rpm=19.5, controller_watch_rpm=0.5)
    name = next(n for n in _verdicts(small, renewals) if "steady" in n)
    assert _verdicts(small, renewals)[name] is True
    assert _verdicts(small, grown)[name] is False
