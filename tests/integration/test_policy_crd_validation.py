"""The policy CRDs on the real API server refuse what the controller's parser refuses, on create
and as an edit of a live valid policy, naming the field; and accept what it accepts."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from compaction.cron import FIELDS, MAX_LENGTH, cron_problems
from compaction.validation import validate_policy
from localcluster import ApiError, Kube
from localcluster.cluster.kube import path
from tests.cron_rules import sample_schedules

API = "apis/compactor.dev/v1alpha1"
KINDS = ["ClusterCompactionPolicy", "CompactionPolicy"]

GOOD_INTERVALS = ["*/30 * * * *", "0 */2 * * *", "5,35 1-5 * * mon-fri", "0 0 1 jan,jul *",
                  "*/15 0-23/2 1-31 1-12 0-6", "59 23 31 DEC SAT", "30 4 ? * ?",
                  "\t00 0\n* * *", "5/10 * * * sun-sat"]
BAD_INTERVALS = [  # value, what the message says
    ("0 24 * * *", "interval's hour"), ("60 * * * *", "interval's minute"),
    ("0 0 0 * *", "interval's day of month"), ("0 0 * 13 *", "interval's month"),
    ("0 0 * * 8", "interval's day of week"), ("0 0 * * 7", "interval's day of week"),
    ("*/0 * * * *", "interval's minute"), ("5-2 * * * *", "interval's minute"),
    ("0 0 * * fri-mon", "interval's day of week"), ("*/ * * * *", "interval's minute"),
    ("30s", "five-field cron schedule"), ("0 */5 * * * *", "five-field cron schedule"),
    ("0," * 300 + "0 * * * *", "Too long"),
]


class Objects:
    """Policies of either kind made by one test, deleted after it."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.made: list[str] = []

    def url(self, kind: str, name: str | None = None) -> str:
        if kind == "ClusterCompactionPolicy":
            return path("clustercompactionpolicies", name=name, api=API)
        return path("compactionpolicies", namespace=self.namespace, name=name, api=API)

    def body(self, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
        meta = {"name": f"v-{uuid.uuid4().hex[:8]}"}
        if kind == "CompactionPolicy":
            meta["namespace"] = self.namespace
        return {"apiVersion": "compactor.dev/v1alpha1", "kind": kind, "metadata": meta,
                "spec": spec}

    def create(self, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
        obj = self.body(kind, spec)
        stored = self.kube.create(self.url(kind), obj)
        self.made.append(self.url(kind, obj["metadata"]["name"]))
        return stored

    def refused(self, kind: str, spec: dict[str, Any]) -> str:
        """The API server's message refusing a policy with ``spec``; the parser refuses it too."""
        obj = self.body(kind, spec)
        with pytest.raises(ApiError) as err:
            self.kube.create(self.url(kind), obj, dry_run=True)
        assert err.value.status == 422, err.value
        assert validate_policy(obj), "the parser accepts what the API server refused"
        return err.value.message


@pytest.fixture
def objects(kube: Kube, compactor_crds: None, namespace: str) -> Iterator[Objects]:
    made = Objects(kube, namespace)
    yield made
    for url in made.made:
        kube.delete(url)


def _interval(value: str) -> dict[str, Any]:
    return {"descheduler": {"interval": value}}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("value", "message"), BAD_INTERVALS,
                         ids=[v[:20] for v, _ in BAD_INTERVALS])
def test_bad_intervals_are_refused_on_create(objects: Objects, kind: str, value: str,
                                             message: str) -> None:
    refused = objects.refused(kind, _interval(value))
    assert "spec.descheduler.interval" in refused and message in refused, refused


@pytest.mark.parametrize("kind", KINDS)
def test_bad_intervals_are_refused_as_edits_of_a_live_policy(objects: Objects, kube: Kube,
                                                             kind: str) -> None:
    live = objects.create(kind, _interval("0 3 * * *"))
    url = objects.url(kind, live["metadata"]["name"])
    for value, message in BAD_INTERVALS:
        with pytest.raises(ApiError) as err:  # a merge patch ...
            kube.patch(url, {"spec": _interval(value)})
        assert err.value.status == 422 and "spec.descheduler.interval" in err.value.message
        assert message in err.value.message, err.value.message
        edited = kube.get(url)  # ... and a replacement of the whole object
        edited["spec"]["descheduler"]["interval"] = value
        with pytest.raises(ApiError) as err:
            kube.request("PUT", url, edited)
        assert err.value.status == 422 and message in err.value.message, err.value.message
    assert kube.get(url)["spec"]["descheduler"]["interval"] == "0 3 * * *"


@pytest.mark.parametrize("kind", KINDS)
def test_good_intervals_are_accepted_on_create_and_as_edits(objects: Objects, kube: Kube,
                                                            kind: str) -> None:
    live = objects.create(kind, _interval(GOOD_INTERVALS[0]))
    url = objects.url(kind, live["metadata"]["name"])
    for value in GOOD_INTERVALS:
        assert cron_problems(value) == []
        stored = objects.create(kind, _interval(value))
        assert stored["spec"]["descheduler"]["interval"] == value
        edited = kube.patch(url, {"spec": _interval(value)})
        assert edited["spec"]["descheduler"]["interval"] == value


def test_the_server_judges_generated_schedules_as_the_parser_does(objects: Objects,
                                                                   kube: Kube) -> None:
    """RE2 in the API server, not Python's re, against compaction.cron, field by field."""
    kind = "ClusterCompactionPolicy"
    disagree = []
    for value in sample_schedules(1500, seed=11):
        problems = cron_problems(value)
        try:
            kube.create(objects.url(kind), objects.body(kind, _interval(value)), dry_run=True)
            said = ""
        except ApiError as e:
            assert e.status == 422, e
            said = e.message
        if bool(said) != bool(problems):
            disagree.append((value, problems, said))
            continue
        if len(value) > MAX_LENGTH:  # the parser stops at the length
            continue
        for name, *_ in FIELDS:  # the refused cron fields are the ones the parser names
            if (f"interval's {name} " in said) != any(p.startswith(f"{name} field")
                                                       for p in problems):
                disagree.append((value, problems, said))
    assert not disagree, disagree[:5]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("spec", "field", "message"), [
    ({"scope": {"labelSelector": {"matchExpressions": [
        {"key": "app", "operator": "In", "values": ["web-*"]}]}}},
     "spec.scope.labelSelector.matchExpressions[0]", "may not contain * wildcards"),
    ({"descheduler": {"defaultEvictor": {"labelSelector": {"matchExpressions": [
        {"key": "app", "operator": "NotIn", "values": ["a", "*"]}]}}}},
     "spec.descheduler.defaultEvictor.labelSelector.matchExpressions[0]",
     "may not contain * wildcards"),
    ({"descheduler": {"loopDetectionWindow": "0s"}}, "spec.descheduler.loopDetectionWindow",
     "loopDetectionWindow must be longer than zero"),
    ({"descheduler": {"loopDetectionWindow": "0h0.000m"}},
     "spec.descheduler.loopDetectionWindow", "loopDetectionWindow must be longer than zero"),
    ({"descheduler": {"suppressionDuration": "0ms"}}, "spec.descheduler.suppressionDuration",
     "suppressionDuration must be longer than zero"),
    ({"descheduler": {"suppressionDuration": "99999999999999999h"}},
     "spec.descheduler.suppressionDuration", "shorter than 2562048h"),
], ids=["label-wildcard", "evictor-label-wildcard", "window-0s", "window-zero-sum",
        "suppression-0ms", "suppression-overflow"])
def test_other_parser_checks_are_the_api_servers(objects: Objects, kind: str,
                                                 spec: dict[str, Any], field: str,
                                                 message: str) -> None:
    refused = objects.refused(kind, spec)
    assert field in refused and message in refused, refused


def test_node_selector_wildcards_and_positive_durations_stay_accepted(objects: Objects) -> None:
    stored = objects.create("ClusterCompactionPolicy", {"descheduler": {
        "nodeSelector": {"matchExpressions": [{"key": "pool", "operator": "In",
                                               "values": ["batch-*"]}]},
        "loopDetectionWindow": "0.5s", "suppressionDuration": "1h0m0s"}})
    assert stored["spec"]["descheduler"]["loopDetectionWindow"] == "0.5s"
