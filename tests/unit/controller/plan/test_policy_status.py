"""A bad deployment never passes silently: the kubelet's reason for a container it cannot start
and a descheduler run's failure are read into the records, and a policy's status and Events
name them (``controller.components.descheduler.failed_run``, ``controller.plan.status``), as table
tests."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from controller.components.descheduler import failed_run
from controller.plan.actions import RecordEvent, WriteStatus
from controller.plan.between_passes import Memory
from controller.plan.decide import plan
from controller.snapshot.owner import OwnerInfo, owner_parser
from controller.snapshot.pod import parse_pod
from tests.unit.controller.plan.test_decide import NOW, RS, SETTINGS, _deploy, _policy, _snapshot

NS = "compactor-system"
CRON = "compactor-descheduler-p"
DEADLINE = "DeadlineExceeded: Job was active longer than specified deadline"
MIN = datetime.timedelta(minutes=1)


def _status(container: dict[str, Any], init: dict[str, Any] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Pending", "containerStatuses": [
        {"name": "app", "state": container}]}
    if init is not None:
        status["initContainerStatuses"] = [{"name": "init", "state": init}]
    return status


@pytest.mark.parametrize(("status", "waiting"), [
    pytest.param(_status({"running": {}}), "", id="running"),
    pytest.param(_status({"waiting": {"reason": "ContainerCreating"}}), "", id="creating"),
    pytest.param(_status({"waiting": {"reason": "ImagePullBackOff",
                                      "message": 'Back-off pulling image "x:1"'}}),
                 'ImagePullBackOff: Back-off pulling image "x:1"', id="image-pull"),
    pytest.param(_status({"waiting": {"reason": "PodInitializing"}},
                         {"waiting": {"reason": "CrashLoopBackOff"}}),
                 "CrashLoopBackOff", id="init-container-first"),
])
def test_a_pods_record_keeps_why_the_kubelet_holds_a_container_back(
        status: dict[str, Any], waiting: str) -> None:
    pod = parse_pod({"metadata": {"namespace": "ns", "name": "p"}, "status": status})
    assert pod.waiting == waiting


def _job_object(name: str, conditions: list[dict[str, str]], created: str = "",
                owner: str = CRON) -> dict[str, Any]:
    return {"metadata": {"namespace": NS, "name": name, "creationTimestamp": created or None,
                         "ownerReferences": [{"kind": "CronJob", "name": owner,
                                              "controller": True}]},
            "status": {"conditions": conditions}}


def test_a_jobs_record_keeps_its_end() -> None:
    parse = owner_parser("Job")
    failed = parse(_job_object("j", [
        {"type": "FailureTarget", "status": "True", "reason": "DeadlineExceeded"},
        {"type": "Failed", "status": "True", "reason": "DeadlineExceeded",
         "message": "Job was active longer than specified deadline"}],
        "2026-12-01T11:00:00Z"))
    assert (failed.failure, failed.complete) == (DEADLINE, False)
    assert failed.created == NOW - 60 * MIN
    done = parse(_job_object("k", [{"type": "Complete", "status": "True"}]))
    assert (done.failure, done.complete) == ("", True)
    running = parse(_job_object("l", [{"type": "Failed", "status": "False"}]))
    assert (running.failure, running.complete) == ("", False)
    # A ReplicaSet's record carries none of it.
    assert owner_parser("ReplicaSet")(_job_object("m", [
        {"type": "Failed", "status": "True"}])).failure == ""


def _job(name: str, minutes_ago: int, failure: str = "", complete: bool = False,
         cronjob: str = CRON, namespace: str = NS) -> OwnerInfo:
    return OwnerInfo("Job", namespace, name, ("CronJob", cronjob), {},
                     NOW - minutes_ago * MIN, complete, failure)


@pytest.mark.parametrize(("jobs", "failed"), [
    pytest.param((), None, id="never-ran"),
    pytest.param((_job("a", 2, complete=True),), None, id="succeeded"),
    pytest.param((_job("a", 2, DEADLINE),), "a", id="failed"),
    pytest.param((_job("a", 3, DEADLINE), _job("b", 1, complete=True)), None,
                 id="a-later-run-succeeded"),
    pytest.param((_job("a", 3, complete=True), _job("b", 2, DEADLINE), _job("c", 1)), "b",
                 id="the-newest-finished-failed-one-still-running"),
    pytest.param((_job("a", 1, DEADLINE, cronjob="compactor-descheduler-q"),
                  _job("b", 1, DEADLINE, namespace="shop")), None, id="another-cronjobs"),
])
def test_the_last_finished_run_decides(jobs: tuple[OwnerInfo, ...], failed: str | None) -> None:
    found = failed_run(jobs, NS, CRON)
    assert (found.name if found else None) == failed


def test_a_failed_run_is_in_the_policys_status_and_an_event_once() -> None:
    job = _job("compactor-descheduler-p-29000000", 1, DEADLINE)
    snapshot = _snapshot(policies=(_policy(),), workloads=(_deploy(),), owners=(RS, job))
    p = plan(snapshot, SETTINGS, NOW)
    (status,) = p.of(WriteStatus)
    (cond,) = [c for c in status.status["conditions"] if c["type"] == "DeschedulerReady"]
    assert (cond["status"], cond["reason"]) == ("False", "RunFailed")
    assert cond["message"] == (
        f"the last descheduler run, Job {NS}/{job.name}, failed: {DEADLINE}; its log says "
        f"why: kubectl logs -n {NS} job/{job.name}")
    (event,) = [e for e in p.of(RecordEvent) if e.body["reason"] == "DeschedulerRunFailed"]
    assert event.body["type"] == "Warning"
    assert event.body["involvedObject"]["kind"] == "CronJob"
    assert event.body["involvedObject"]["name"] == CRON and event.key
    # The executor notes the Event it recorded: the next pass does not repeat it.
    noted = Memory().noted(event.key, NOW)
    assert "DeschedulerRunFailed" not in [
        e.body["reason"] for e in plan(snapshot, SETTINGS, NOW + MIN, noted).of(RecordEvent)]
    # A run that succeeds later clears the condition.
    fixed = plan(_snapshot(policies=(_policy(),), workloads=(_deploy(),), owners=(
        RS, job, _job("compactor-descheduler-p-29000001", 0, complete=True))), SETTINGS, NOW)
    (status,) = fixed.of(WriteStatus)
    assert [c["reason"] for c in status.status["conditions"]
            if c["type"] == "DeschedulerReady"] != ["RunFailed"]
