"""The scale benchmark's pure parts (``loadtest.scale_figures``): the policies and when their
descheduler CronJobs fire, the API server's counters read as rates, the controller's pass
phases, the floor and the judgement. `make bench-e2e NODES=5000` runs the clusters."""

from __future__ import annotations

import datetime
import math

import pytest

from compaction import names
from controller.plan.scheduler_routing import Routing, judge
from controller.snapshot.owned import parse_owned
from loadtest import scale_figures as sf
from loadtest.kwok_cluster import shares, team_namespaces
from loadtest.scale import scheduler_available


def test_twenty_policies_cluster_wide_and_namespaced_cover_every_team_namespace() -> None:
    policies = sf.policies()
    assert len(policies) == 20
    assert sum(p.kind == names.POLICY_KIND for p in policies) == 10
    assert sum(p.kind == names.NAMESPACED_POLICY_KIND for p in policies) == 10
    covered = [ns for p in policies for ns in (
        p.spec["scope"]["namespaceSelector"]["values"] if not p.namespace else [p.namespace])]
    assert sorted(covered) == sorted(team_namespaces(sf.TEAMS))  # each once
    assert len({p.id for p in policies}) == 20
    assert all("namespaceSelector" not in p.spec["scope"] for p in policies if p.namespace)
    assert all(p.spec["setLabelsByEviction"] is False for p in policies)


def test_the_teams_share_every_workload_of_the_mix() -> None:
    rows = list(shares(5000, sf.TEAMS))
    assert {ns for ns, *_ in rows} == set(team_namespaces(sf.TEAMS))
    assert 144_000 < sum(r for *_, r, _, _ in rows) <= 145_000  # 29 a node, rounded down


@pytest.mark.parametrize(("field", "minutes"), [
    ("*/30", [0, 30]), ("3-59/10", [3, 13, 23, 33, 43, 53]), ("7", [7]),
    ("5/20", [5, 25, 45]), ("1,2,40-42", [1, 2, 40, 41, 42]), ("*", list(range(60)))])
def test_cron_minutes(field: str, minutes: list[int]) -> None:
    assert sf.cron_minutes(field) == minutes


def test_the_cronjobs_fire_two_a_minute_each_policy_once_in_ten_minutes() -> None:
    policies = sf.policies()
    fires = sf.stagger([p.spec["descheduler"]["interval"] for p in policies], sf.CRON_EVERY)
    assert sorted(i for _, i in fires) == list(range(20))
    assert [m for m, _ in fires] == sorted(m for m in range(10) for _ in range(2))
    assert len(sf.stagger([p.spec["descheduler"]["interval"] for p in policies], 25)) == 50


def _req(verb: str, resource: str, value: int, code: str = "200", sub: str = "") -> str:
    """One line of the API server's apiserver_request_total."""
    return (f'apiserver_request_total{{code="{code}",component="apiserver",group="",'
            f'resource="{resource}",scope="resource",subresource="{sub}",verb="{verb}",'
            f'version="v1"}} {value}')


_BEFORE = "\n".join([
    "# TYPE apiserver_request_total counter",
    _req("PATCH", "pods", 100), _req("PATCH", "pods", 2, code="409"),
    _req("PUT", "leases", 50), _req("POST", "events", 10, code="201"),
    'apiserver_cache_list_returned_objects_total{index="",resource_prefix="/pods"} 1000',
    'apiserver_storage_list_returned_objects_total{resource="nodes"} 10'])
_AFTER = "\n".join([
    _req("PATCH", "pods", 130), _req("PATCH", "pods", 2, code="409"),
    _req("PATCH", "pods", 4, sub="status"), _req("PUT", "leases", 74),
    _req("POST", "events", 10, code="201"),
    _req("PATCH", "clustercompactionpolicies", 6, sub="status"),
    'apiserver_cache_list_returned_objects_total{index="",resource_prefix="/pods"} 151000',
    'apiserver_cache_list_returned_objects_total{group="",index="",resource="nodes"} 5000',
    'apiserver_storage_list_returned_objects_total{resource="nodes"} 10',
    'apiserver_watch_events_total{group="",resource="pods",version="v1"} 2000'])


def test_requests_per_minute_by_verb_and_resource_from_counter_deltas() -> None:
    rpm = sf.rates(_BEFORE, _AFTER, 120.0)
    assert rpm == {"PATCH pods": 15.0, "PUT leases": 12.0,
                   "PATCH clustercompactionpolicies/status": 3.0, "PATCH pods/status": 2.0}
    assert list(rpm)[0] == "PATCH pods"  # the busiest first


def test_a_counter_that_went_backwards_counts_from_zero() -> None:
    assert sf.rates(_AFTER, _BEFORE, 60.0)["PATCH pods"] == 102.0  # every code


def test_objects_sent_by_resource_to_lists_and_watches() -> None:
    assert sf.listed(_BEFORE, _AFTER) == {"pods": 152_000.0, "nodes": 5000.0}


def test_events_and_status_writes_per_pass() -> None:
    rpm = {"POST events": 4.0, "PATCH events": 2.0, "PATCH pods": 99.0,
           "PATCH clustercompactionpolicies/status": 3.0,
           "PATCH compactionpolicies/status": 3.0, "GET clustercompactionpolicies/status": 7.0}
    assert sf.events_and_status(rpm, passes_per_min=2.0) == (3.0, 3.0)
    assert sf.events_and_status(rpm, passes_per_min=0.0) == (0.0, 0.0)


def _hist(name: str, counts: dict[float, int], labels: str = "") -> str:
    sep = "," if labels else ""
    return "\n".join(f'{name}_bucket{{{labels}{sep}le="{"+Inf" if math.isinf(le) else le}"}} {c}'
                     for le, c in counts.items())


def test_pass_phases_between_two_scrapes() -> None:
    def scrape_at(passes: dict[float, int], write: dict[float, int]) -> str:
        return "\n".join([
            _hist("compactor_reconcile_duration_seconds", passes),
            _hist("compactor_reconcile_phase_duration_seconds", write, 'phase="write"'),
            _hist("compactor_reconcile_phase_duration_seconds", {1.0: 0, math.inf: 0},
                  'phase="read"')])
    before = scrape_at({1.0: 10, 10.0: 10, math.inf: 10}, {1.0: 10, 10.0: 10, math.inf: 10})
    after = scrape_at({1.0: 10, 10.0: 110, math.inf: 110}, {1.0: 60, 10.0: 110, math.inf: 110})
    got = sf.phases(before, after)
    assert got.passes == 100
    assert 1.0 < got.p50["pass"] < got.p99["pass"] <= 10.0
    assert got.p50["write"] == pytest.approx(1.0)
    assert math.isnan(got.p99["read"])  # nothing observed


def test_the_floor_is_the_best_loop_and_the_ratio_against_it() -> None:
    runs = (sf.FloorRun(8, 1000, 4.0), sf.FloorRun(16, 1000, 2.5), sf.FloorRun(32, 1000, 3.0))
    seconds, best = sf.floor_seconds(runs, 150_000)
    assert best == runs[1]
    assert seconds == pytest.approx(375.0)
    assert math.isnan(sf.floor_seconds((), 10)[0])


def _figures(**kw: object) -> sf.Figures:
    base: dict[str, object] = dict(
        nodes=5000, pods=145_000, policies=20, build_s=90.0, labelled_s=500.0,
        first_drain_s=60.0, floor_s=400.0, floor=(sf.FloorRun(16, 7000, 20.0),),
        labelling=sf.Phases(50, {"pass": 5.0}, {"pass": 9.0}),
        steady=sf.Phases(4, {"pass": 2.0}, {"pass": 4.0}),
        rss_mib={"compactor-controller": 900.0, "webhook": 80.0},
        cpu_labelling={"kube-apiserver": 900.0}, cpu_steady={"kube-apiserver": 3.0},
        steady_rpm={"PUT leases": 12.0}, labelling_requests={"PATCH pods": 150_000.0},
        controller_rpm=14.0, events_per_pass=0.0,
        status_writes_per_pass=0.0, load="1.0 → 2.0",
        runs=(sf.DeschedulerRun("team-00", 30.0, 700.0, {"pods": 150_000.0}, 10.0, 5, 7),))
    base.update(kw)
    return sf.Figures(**base)  # type: ignore[arg-type]


def test_goals_judged_and_the_tables_render() -> None:
    ok = {n: v for n, v, _ in sf.verdicts(_figures())}
    assert all(ok.values()), ok
    slow = {n: v for n, v, _ in sf.verdicts(_figures(labelled_s=700.0, rss_mib={
        "compactor-controller": 1100.0, "webhook": 80.0}))}
    assert not slow["labelling within 1.5× of the floor"]
    assert not slow["controller peak RSS under 1 GiB"]
    assert slow["webhook peak RSS under 300 MiB"]
    big = _figures()
    assert "| labelling / floor (goal ≤ 1.5) | 1.25 |" in sf.table([big])
    assert "`PUT leases` | 12.0 |" in sf.requests_table([big])
    assert "`PATCH pods` | 150,000.0 |" in sf.requests_table([big], attr="labelling_requests")
    assert "| 5,000 | team-00 | 30.0 | 700 | pods 150,000 | 10.0 | 7 / 5 |" in sf.runs_table([big])


def test_the_compaction_schedulers_deployment_made_available_reads_as_available() -> None:
    """The status the harness writes in the controller manager's stead: the controller's own
    judgement routes to the compaction scheduler (else every drain pauses)."""
    now = datetime.datetime(2026, 12, 6, 14, 0, tzinfo=datetime.UTC)
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
        "name": "compactor-scheduler", "namespace": "compactor-system", "uid": "d",
        "generation": 1, "resourceVersion": "5", "creationTimestamp": "2026-12-06T13:59:00Z"},
        **scheduler_available("2026-12-06T13:59:30Z")}
    health = judge(parse_owned("Deployment", deployment), False, now)
    assert health.routing is Routing.AVAILABLE
    assert health.routes
