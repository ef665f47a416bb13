"""The compaction scheduler's health and what a pass does with it, as table tests: new Pods
go to it only while it can schedule, Pods left Pending on it are replaced, the runtime hook
and new drains wait, and status, Events and metrics say so."""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

import orjson
import pytest

from compaction.intent import intent_for
from compaction.workload import WorkloadType
from controller.plan.actions import (
    Evict,
    EvictPurpose,
    Patch,
    Plan,
    RecordEvent,
    Target,
    WriteStatus,
)
from controller.plan.decide import plan
from controller.plan.scheduler_routing import Routing, judge, pod_cause
from controller.snapshot.node import NodeInfo
from controller.snapshot.owned import OwnedInfo
from controller.snapshot.pod import PodInfo
from tests.unit.controller.plan.test_decide import (
    ANNOTATED,
    NOW,
    RS,
    SETTINGS,
    _deploy,
    _own,
    _policy,
    _snapshot,
)
from tests.unit.controller.plan.test_taint_life import SETTLED, _nodes, _untainted

MIN = datetime.timedelta(minutes=1)
DOWN_AFTER, RECOVERY = SETTINGS.scheduler_down_after, SETTINGS.scheduler_recovery


def _deployment(available: int, since: datetime.timedelta | None,
                created: datetime.timedelta = 60 * MIN) -> OwnedInfo:
    """The scheduler's Deployment: ``available`` replicas, its Available condition holding
    for ``since`` (None: no condition yet), created ``created`` ago."""
    return replace(_own("Deployment", "compactor-scheduler", "g2", available=available),
                   created=NOW - created,
                   available=None if since is None else available > 0,
                   available_changed=None if since is None else NOW - since)


@pytest.mark.parametrize(("deployment", "fell_back", "routing"), [
    pytest.param(None, False, Routing.STARTING, id="not-created-yet"),
    pytest.param(_deployment(0, None, created=DOWN_AFTER / 2), False, Routing.STARTING,
                 id="just-created"),
    pytest.param(_deployment(0, None, created=DOWN_AFTER * 2), False, Routing.UNAVAILABLE,
                 id="never-available-image-pull"),
    pytest.param(_deployment(1, 10 * MIN), False, Routing.AVAILABLE, id="running"),
    pytest.param(_deployment(0, DOWN_AFTER / 2), False, Routing.STARTING,
                 id="a-blip-shorter-than-down-after"),
    pytest.param(_deployment(0, DOWN_AFTER * 2), False, Routing.UNAVAILABLE, id="down"),
    pytest.param(_deployment(0, DOWN_AFTER / 2), True, Routing.UNAVAILABLE,
                 id="still-down-after-falling-back"),
    pytest.param(_deployment(1, RECOVERY / 2), True, Routing.RECOVERING, id="back-not-long"),
    pytest.param(_deployment(1, RECOVERY * 2), True, Routing.AVAILABLE, id="back-for-long"),
    pytest.param(_deployment(1, RECOVERY / 2), False, Routing.AVAILABLE,
                 id="a-blip-never-fell-back"),
])
def test_new_pods_go_to_the_scheduler_only_while_it_can_schedule(
        deployment: OwnedInfo | None, fell_back: bool, routing: Routing) -> None:
    health = judge(deployment, fell_back, NOW, DOWN_AFTER, RECOVERY)
    assert health.routing is routing
    assert health.routes is (routing in (Routing.AVAILABLE, Routing.STARTING))


# A managed-scheduler policy whose scheduler has had no available replica for 10 minutes.
DOWN = (_own("ConfigMap", "compactor-scheduler-config", "r5"), _deployment(0, 10 * MIN))
UP = (_own("ConfigMap", "compactor-scheduler-config", "r5"), _deployment(1, 10 * MIN))
NODE = NodeInfo("n1", {}, {"cpu": 4000, "memory": 2**34 * 1000, "pods": 110_000})


def _status_with(reason: str) -> dict[str, Any]:
    return {"conditions": [{"type": "SchedulerReady", "status": "False", "reason": reason,
                            "message": "", "lastTransitionTime": "2026-12-01T11:00:00Z"}]}


def _pass(own: tuple[OwnedInfo, ...], pods: tuple[PodInfo, ...] = (),
          previous: str | None = None, **spec: Any) -> Plan:
    policy = _policy(**spec)
    if previous is not None:
        policy = replace(policy, status=_status_with(previous))
    return plan(_snapshot(policies=(policy,), own=own, nodes=(NODE,), owners=(RS,),
                          workloads=(_deploy(),), pods=pods), SETTINGS, NOW)


def _intent(p: Plan) -> dict[str, Any]:
    (patch,) = [a for a in p.of(Patch) if a.target is Target.WORKLOAD]
    return dict(orjson.loads(patch.body["metadata"]["annotations"]["compactor.dev/intent"]))


def test_without_an_available_scheduler_the_intent_names_none_and_the_labels_stay() -> None:
    down = _intent(_pass(DOWN))
    assert "schedulerName" not in down
    assert down["labels"]["compactor.dev/policy"] == "p"
    assert _intent(_pass(UP))["schedulerName"] == "compactor-scheduler"


def test_status_event_and_plan_say_why_new_pods_go_to_the_default_scheduler() -> None:
    p = _pass(DOWN)
    assert p.scheduler_routing == "Unavailable"
    (status,) = p.of(WriteStatus)
    (cond,) = [c for c in status.status["conditions"] if c["type"] == "SchedulerReady"]
    assert (cond["status"], cond["reason"]) == ("False", "Unavailable")
    assert "default scheduler" in cond["message"]
    events = [e.body["reason"] for e in p.of(RecordEvent)]
    assert "CompactionSchedulerUnavailable" in events
    # Told once: the next pass reads the fallback from the status it wrote.
    again = _pass(DOWN, previous="Unavailable")
    assert "CompactionSchedulerUnavailable" not in [e.body["reason"]
                                                    for e in again.of(RecordEvent)]
    # Back for long enough: the intent names it again, and the Event says so.
    back = _pass(UP, previous="Unavailable")
    assert back.scheduler_routing == "Available"
    assert "CompactionSchedulerRestored" in [e.body["reason"] for e in back.of(RecordEvent)]
    assert _intent(back)["schedulerName"] == "compactor-scheduler"


def _pending(name: str, age: datetime.timedelta, scheduler: str = "compactor-scheduler"
             ) -> PodInfo:
    return PodInfo("shop", name, f"u-{name}", {}, {}, ("ReplicaSet", "web-1"),
                   scheduler_name=scheduler, phase="Pending", created=NOW - age)


def test_pods_left_pending_on_a_missing_scheduler_past_the_bound_are_replaced() -> None:
    old = _pending("old", SETTINGS.stranded_after * 2)
    young = _pending("young", SETTINGS.stranded_after / 2)
    elsewhere = _pending("elsewhere", SETTINGS.stranded_after * 2, "default-scheduler")
    p = _pass(DOWN, (old, young, elsewhere))
    (evict,) = p.of(Evict)
    assert (evict.name, evict.pod_uid, evict.purpose) == ("old", "u-old", EvictPurpose.STRANDED)
    assert p.stranded == 1
    assert [e.body["reason"] for e in evict.then] == ["StrandedPodReplaced"]
    # While the scheduler runs, a Pending Pod waits for room as any Pod does.
    assert _pass(UP, (old,)).of(Evict) == []
    # Recovering: it is available, it will bind them.
    assert _pass(_recovering(), (old,), previous="Unavailable").of(Evict) == []


def _recovering() -> tuple[OwnedInfo, ...]:
    return (UP[0], _deployment(1, RECOVERY / 2))


def test_only_kinds_the_eviction_table_allows_are_replaced() -> None:
    old = _pending("old", SETTINGS.stranded_after * 2)
    p = plan(_snapshot(policies=(_policy(),), own=DOWN, nodes=(NODE,), owners=(RS,),
                       workloads=(replace(_deploy(), view=replace(
                           _deploy().view, kind=WorkloadType.CRON_JOB)),), pods=(old,)),
             SETTINGS, NOW)
    assert p.of(Evict) == []


def test_the_runtime_hook_and_new_drains_wait_while_the_scheduler_cannot_schedule() -> None:
    # A Pod admitted before the policy, which the hook would replace at once if it could.
    stale = PodInfo("shop", "web-1-a", "u1", {}, {}, ("ReplicaSet", "web-1"), node_name="n1",
                    phase="Running", ready=True, created=NOW - 60 * MIN)
    # While it runs, the hook takes the workload on (it notes the intent it saw, then waits
    # out the intent grace before it replaces anything).
    up = _pass(UP, (stale,), setLabelsByEviction=True)
    assert [a for a in up.of(Patch) if a.target is Target.STATE]
    down = _pass(DOWN, (stale,), setLabelsByEviction=True)
    assert down.of(Evict) == [] and not [a for a in down.of(Patch) if a.target is Target.STATE]
    assert down.drains[0].draining == ()


def test_a_policy_on_an_external_scheduler_keeps_it_whatever_the_managed_one_does() -> None:
    p = _pass(DOWN, scheduler={"useManagedScheduler": False,
                               "externalSchedulerName": "my-scheduler"})
    assert _intent(p)["schedulerName"] == "my-scheduler"
    assert intent_for(_policy().policy, WorkloadType.DEPLOYMENT, False).scheduler_name is None


def test_no_new_drain_starts_while_the_scheduler_cannot_schedule() -> None:
    def drains(own: tuple[OwnedInfo, ...]) -> tuple[str, ...]:
        p = plan(_snapshot(nodes=_untainted(), owners=(RS,), policies=(_policy(),), own=own,
                           workloads=(_deploy({"compactor.dev/policy": "p"}, ANNOTATED),),
                           pods=SETTLED), SETTINGS, NOW)
        return p.drains[0].draining

    assert drains(UP) == ("sparse",)
    assert drains(DOWN) == ()


def test_a_drain_under_way_pauses_while_the_scheduler_cannot_schedule() -> None:
    """The node keeps its taint, and its Pods lose the mark the descheduler evicts by: an
    evictee would wait for a scheduler that cannot place it."""
    marked = replace(SETTLED[1], labels={**SETTLED[1].labels, "compactor.dev/draining": "p"})

    def draining_label(own: tuple[OwnedInfo, ...]) -> tuple[tuple[str, ...], Any]:
        p = plan(_snapshot(nodes=_nodes(), owners=(RS,), policies=(_policy(),), own=own,
                           workloads=(_deploy({"compactor.dev/policy": "p"}, ANNOTATED),),
                           pods=(SETTLED[0], marked)), SETTINGS, NOW)
        patches = [a.body["metadata"].get("labels", {}) for a in p.of(Patch)
                   if a.path.endswith(f"/pods/{marked.name}")]
        return p.drains[0].draining, patches[0].get("compactor.dev/draining", "kept") \
            if patches else "kept"

    assert draining_label(UP) == (("sparse",), "kept")
    assert draining_label(DOWN) == (("sparse",), None)


PULL = ('Back-off pulling image "registry.k8s.io/kube-scheduler:v0.0.0-missing": '
        'ErrImagePull: failed to resolve reference')


def _scheduler_pod(name: str, waiting: str, namespace: str = "compactor-system",
                   component: str = "scheduler", deleting: bool = False) -> PodInfo:
    return PodInfo(namespace, name, f"u-{name}", {"app.kubernetes.io/name": "compactor",
                                                  "app.kubernetes.io/component": component},
                   phase="Pending", waiting=waiting, deleting=deleting)


@pytest.mark.parametrize(("pods", "cause"), [
    pytest.param((), "", id="no-pod"),
    pytest.param((_scheduler_pod("s-1", ""),), "", id="starting-or-running"),
    pytest.param((_scheduler_pod("s-2", f"ImagePullBackOff: {PULL}"),
                  _scheduler_pod("s-1", "ErrImagePull: x")),
                 "Pod s-1 cannot start: ErrImagePull: x", id="first-by-name"),
    pytest.param((_scheduler_pod("s-1", "CrashLoopBackOff: x", deleting=True),), "",
                 id="a-deleted-pod-says-nothing"),
    pytest.param((_scheduler_pod("s-1", "ErrImagePull: x", namespace="shop"),
                  _scheduler_pod("w-1", "ErrImagePull: x", component="webhook")), "",
                 id="not-the-schedulers"),
])
def test_the_scheduler_pods_waiting_reason_is_the_cause(pods: tuple[PodInfo, ...],
                                                        cause: str) -> None:
    assert pod_cause(pods, "compactor-system") == cause


def test_a_pod_that_cannot_pull_its_image_is_named_in_status_and_event() -> None:
    """The scheduler's Deployment never available (its image tag does not exist): the
    condition and the Event name the Pod, the kubelet's reason and the image."""
    never = _deployment(0, None, created=DOWN_AFTER * 2)
    p = _pass((_own("ConfigMap", "compactor-scheduler-config", "r5"), never),
              (_scheduler_pod("compactor-scheduler-abc", f"ImagePullBackOff: {PULL}"),))
    (status,) = p.of(WriteStatus)
    (cond,) = [c for c in status.status["conditions"] if c["type"] == "SchedulerReady"]
    assert (cond["status"], cond["reason"]) == ("False", "Unavailable")
    assert cond["message"].endswith(
        f"; Pod compactor-scheduler-abc cannot start: ImagePullBackOff: {PULL}")
    (event,) = [e for e in p.of(RecordEvent)
                if e.body["reason"] == "CompactionSchedulerUnavailable"]
    assert "ImagePullBackOff" in event.body["message"] and "v0.0.0-missing" in \
        event.body["message"]
    # A rollout stuck on a bad image, the old Pod still running: available, and said.
    stuck = _pass(UP, (_scheduler_pod("compactor-scheduler-new", "ErrImagePull: x"),))
    (status,) = stuck.of(WriteStatus)
    (cond,) = [c for c in status.status["conditions"] if c["type"] == "SchedulerReady"]
    assert (cond["status"], cond["reason"]) == ("True", "Available")
    assert cond["message"] == ("compactor-scheduler is running; Pod compactor-scheduler-new "
                               "cannot start: ErrImagePull: x")
