"""The chaos run's judgements, from records alone: duplicate evictions, eviction limits, the
runtime hook's one-at-a-time rule, takeover, the failed window; the audit log and the
Prometheus text they are read from."""

from __future__ import annotations

import datetime

import orjson
import pytest

from localcluster.chaos.audit import AuditEvent, evictions, parse, pod_creations
from localcluster.chaos.reliability import (
    DeschedulerRun,
    Limits,
    duplicate_evictions,
    failed_window,
    hook_overlaps,
    leaks,
    over_limits,
    takeover,
)
from localcluster.chaos.timeline import PodState
from localcluster.cluster import scrape

T0 = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)


def _event(seconds: float, name: str = "web-1", code: int = 201, sub: str = "eviction",
           user: str = "controller", ns: str = "chaos", dry: bool = False) -> AuditEvent:
    return AuditEvent(T0 + datetime.timedelta(seconds=seconds), "create", user, "pods", sub,
                      ns, name, code, dry)


def test_an_audit_line_becomes_a_record_and_only_complete_stages_count() -> None:
    line = orjson.dumps({
        "stage": "ResponseComplete", "verb": "create",
        "requestURI": "/api/v1/namespaces/chaos/pods?dryRun=All",
        "requestReceivedTimestamp": "2026-12-01T12:00:01.500000Z",
        "user": {"username": "system:admin"},
        "objectRef": {"resource": "pods", "namespace": "chaos"},
        "responseStatus": {"code": 500}})
    event = parse(line)
    assert event == AuditEvent(T0 + datetime.timedelta(seconds=1.5), "create", "system:admin",
                               "pods", "", "chaos", "", 500, True)
    assert parse(line.replace(b"ResponseComplete", b"ResponseStarted")) is None
    assert parse(line[:40]) is None  # a line still being written


def test_creations_leave_out_dry_runs_other_namespaces_and_evictions() -> None:
    events = [_event(0, sub=""), _event(1, sub="", dry=True), _event(2, sub="", ns="other"),
              _event(3), _event(4, sub="", code=500)]
    assert [e.at for e in pod_creations(events, ["chaos"])] == [events[0].at, events[4].at]
    assert evictions(events) == [events[3]]
    assert failed_window(pod_creations(events, ["chaos"])) == 0.0
    assert failed_window([_event(0, sub=""), _event(1, sub="")]) is None


DUPLICATES = [
    ("one each", [_event(0, "a"), _event(1, "b")], 0),
    ("granted twice", [_event(0, "a"), _event(1, "a")], 1),
    ("by hook and descheduler", [_event(0, "a"), _event(1, "a", user="desch")], 1),
    ("refused then granted", [_event(0, "a", code=429), _event(1, "a")], 0),
    ("three times", [_event(i, "a") for i in range(3)], 2),
]


@pytest.mark.parametrize(("events", "want"), [c[1:] for c in DUPLICATES],
                         ids=[c[0] for c in DUPLICATES])
def test_duplicate_evictions(events: list[AuditEvent], want: int) -> None:
    assert duplicate_evictions(events) == want


LIMITS = Limits(per_node=2, per_namespace=2, total=3)
RUNS = [
    ("within", (("a/1", "n1"), ("b/2", "n1"), ("a/3", "n2")), 0),
    ("one node too many", (("a/1", "n1"), ("b/2", "n1"), ("c/3", "n1")), 1),
    ("one namespace too many", (("a/1", "n1"), ("a/2", "n2"), ("a/3", "n3")), 1),
    ("total", (("a/1", "n1"), ("b/2", "n2"), ("c/3", "n3"), ("d/4", "n4")), 1),
]


@pytest.mark.parametrize(("evicted", "want"), [c[1:] for c in RUNS], ids=[c[0] for c in RUNS])
def test_evictions_past_a_descheduler_runs_limits(evicted: tuple[tuple[str, str], ...],
                                                   want: int) -> None:
    assert over_limits([DeschedulerRun(0, 1, evicted)], LIMITS) == want


def _pod(at: float, name: str, ready: bool = True, deleting: bool = False,
         present: bool = True) -> PodState:
    return PodState(T0.timestamp() + at, "chaos", name, "web", ready, deleting, present)


def _overlaps(records: list[PodState], evicted_at: list[tuple[float, str]]) -> int:
    return hook_overlaps(records, [_event(t, n) for t, n in evicted_at],
                         lambda _w, _t: 2, lambda ns, _n: f"{ns}/web")


def test_one_eviction_at_a_time_holds_when_the_workload_is_whole_in_between() -> None:
    records = [_pod(0, "a"), _pod(0, "b"),
               _pod(2, "a", deleting=True), _pod(2.1, "a", present=False),
               _pod(2.2, "c", ready=False), _pod(3, "c")]  # back at 2 Ready Pods
    assert _overlaps(records, [(1, "a"), (4, "b")]) == 0


def test_a_second_eviction_before_the_replacement_is_ready_is_one_too_many() -> None:
    records = [_pod(0, "a"), _pod(0, "b"),
               _pod(2, "a", deleting=True), _pod(2.1, "a", present=False),
               _pod(2.2, "c", ready=False), _pod(6, "c")]
    assert _overlaps(records, [(1, "a"), (4, "b")]) == 1


def test_replacing_pods_stranded_on_a_missing_scheduler_is_not_the_hook_overlapping() -> None:
    # Two Pods never bound (waiting on a scheduler that is gone) evicted together: neither
    # took anything that runs, so neither counts against the hook's one-at-a-time rule.
    def waiting(at: float, name: str) -> PodState:
        return PodState(T0.timestamp() + at, "chaos", name, "web", False, False, True, False)
    records = [_pod(0, "a"), waiting(0, "b"), waiting(0, "c")]
    assert _overlaps(records, [(1, "b"), (1.1, "c")]) == 0
    bound = [_pod(0, "a"), _pod(0, "b", ready=False), _pod(0, "c", ready=False)]
    assert _overlaps(bound, [(1, "b"), (1.1, "c")]) == 1


def test_takeover_counts_from_the_kill_to_another_holder() -> None:
    holders = [(0.0, "a"), (20.0, "b")]
    assert takeover(holders, killed_at=4.0, killed="a") == 16.0
    assert takeover([(0.0, "a")], killed_at=4.0, killed="a") is None


def test_a_planted_value_found_in_a_log_is_named_with_the_log() -> None:
    logs = {"webhook.log": "admitted pod x", "controller.log": "env s3cr3t leaked"}
    assert leaks({"env": "s3cr3t", "token": "tok"}, logs) == [("env", "controller.log")]


_H = "apiserver_admission_webhook_admission_duration_seconds_bucket"
TEXT = "\n".join([
    "# TYPE apiserver_admission_webhook_admission_duration_seconds histogram",
    f'{_H}{{name="w",operation="CREATE",le="0.005"}} 90',
    f'{_H}{{name="w",operation="CREATE",le="0.025"}} 99',
    f'{_H}{{name="w",operation="CREATE",le="+Inf"}} 100',
    f'{_H}{{name="x",operation="CREATE",le="0.005"}} 5',
    f'{_H}{{name="x",operation="CREATE",le="0.025"}} 5',
    f'{_H}{{name="x",operation="CREATE",le="+Inf"}} 5',
    'apiserver_admission_webhook_fail_open_count{name="w",type="admit"} 3',
    'apiserver_admission_webhook_fail_open_count{name="x",type="admit"} 4'])


def test_histograms_and_values_are_read_for_the_labels_asked() -> None:
    name = "apiserver_admission_webhook_admission_duration_seconds"
    buckets = scrape.histogram(TEXT, name, {"name": "w"})
    assert buckets == [(0.005, 90.0), (0.025, 99.0), (float("inf"), 100.0)]
    assert scrape.quantile(buckets, 0.99) == pytest.approx(0.025)
    assert scrape.quantile(buckets, 0.5) == pytest.approx(0.005 * 50 / 90)
    assert scrape.value(TEXT, "apiserver_admission_webhook_fail_open_count",
                        {"name": "w"}) == 3
    assert scrape.value(TEXT, "apiserver_admission_webhook_fail_open_count") == 7


def test_a_sample_is_the_one_series_with_exactly_the_labels_asked() -> None:
    text = "\n".join([
        "# TYPE compactor_owner_api_requests_total counter",
        "compactor_owner_api_requests_total 12",
        'compactor_admission_requests_total{outcome="patched"} 5',
        'compactor_admission_requests_total{outcome="skipped"} 2',
        'compactor_owner_watch_synced{kind="ReplicaSet",extra="x"} 1'])
    assert scrape.sample(text, "compactor_owner_api_requests_total") == 12
    assert scrape.sample(text, "compactor_admission_requests_total", {"outcome": "skipped"}) == 2
    assert scrape.sample(text, "compactor_admission_requests_total") == 0
    assert scrape.sample(text, "compactor_owner_watch_synced", {"kind": "ReplicaSet"}) == 0
    assert scrape.sample(text, "compactor_owner_lookups_total", {"result": "hit"}) == 0


def test_a_delta_across_a_restart_keeps_the_second_reading() -> None:
    before = [(0.005, 90.0), (float("inf"), 100.0)]
    assert scrape.delta([(0.005, 95.0), (float("inf"), 110.0)], before) == [
        (0.005, 5.0), (float("inf"), 10.0)]
    restarted = [(0.005, 3.0), (float("inf"), 4.0)]
    assert scrape.delta(restarted, before) == restarted
