"""A policy that turns invalid after it was valid acts on its last valid spec, kept in its
status: a bad edit must not act like a deletion (labels, intent, CronJob and scheduler torn
down). Table tests of ``plan``; the objects are read as the reader reads them."""

from __future__ import annotations

from typing import Any

from controller.plan.actions import Apply, Delete, Patch, Plan, RecordEvent, Target, WriteStatus
from controller.plan.decide import plan
from controller.snapshot.policies import PolicyInfo, parse_policy_info
from tests.unit.controller.plan.test_decide import NOW, RS, SCHEDULER, SETTINGS, _deploy, _snapshot

GOOD = {"scope": {"namespaceSelector": {"operator": "In", "values": ["shop"]}}}
BAD = {**GOOD, "descheduler": {"interval": "0 24 * * *"}}


def _object(spec: dict[str, Any], status: dict[str, Any] | None = None,
            generation: int = 2) -> PolicyInfo:
    return parse_policy_info({
        "apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
        "metadata": {"name": "p", "uid": "uid-p", "generation": generation,
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": spec, "status": status or {}})


def _pass(obj: PolicyInfo) -> Plan:
    return plan(_snapshot(policies=(obj,), own=SCHEDULER, owners=(RS,),
                          workloads=(_deploy(),)), SETTINGS, NOW)


def _status(p: Plan) -> dict[str, Any]:
    (status,) = p.of(WriteStatus)
    return dict(status.status)


def test_a_valid_policy_keeps_its_spec_in_its_status() -> None:
    status = _status(_pass(_object(GOOD, generation=1)))
    assert status["lastValidSpec"] == GOOD and status["lastValidGeneration"] == 1


def test_a_bad_edit_acts_on_the_last_valid_spec_and_says_so() -> None:
    kept = _status(_pass(_object(GOOD, generation=1)))
    edited = _object(BAD, kept, generation=2)
    assert edited.policy is None and edited.last_valid is not None
    p = _pass(edited)
    # Nothing torn down: the workload gets its intent, the objects stay and are applied.
    (workload,) = [a for a in p.of(Patch) if a.target is Target.WORKLOAD]
    assert "compactor.dev/intent" in workload.body["metadata"]["annotations"]
    assert p.of(Delete) == []
    assert any(a.path.endswith("/cronjobs/compactor-descheduler-p") for a in p.of(Apply))
    status = _status(p)
    (valid,) = [c for c in status["conditions"] if c["type"] == "Valid"]
    assert valid["status"] == "False" and valid["reason"] == "InvalidSpec"
    assert "spec.descheduler.interval" in valid["message"]
    assert "acting on the last valid spec (generation 1)" in valid["message"]
    assert status["lastValidSpec"] == GOOD and status["lastValidGeneration"] == 1
    assert [e.body["reason"] for e in p.of(RecordEvent)] == ["InvalidSpecIgnored"]
    assert "ClusterCompactionPolicy/p" in p.invalid  # and the pass reports it


def test_a_policy_never_valid_acts_on_nothing() -> None:
    p = _pass(_object(BAD, generation=1))
    assert [a for a in p.of(Patch) if a.target is Target.WORKLOAD] == []
    assert not any("/cronjobs/" in a.path for a in p.of(Apply))
    assert "lastValidSpec" not in _status(p)


def test_fixing_the_spec_makes_it_the_last_valid_one() -> None:
    kept = _status(_pass(_object(GOOD, generation=1)))
    fixed = {**GOOD, "descheduler": {"interval": "0 23 * * *"}}
    status = _status(_pass(_object(fixed, kept, generation=3)))
    assert status["lastValidSpec"] == fixed and status["lastValidGeneration"] == 3
    (valid,) = [c for c in status["conditions"] if c["type"] == "Valid"]
    assert valid["status"] == "True"
