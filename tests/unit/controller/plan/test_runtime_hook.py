"""The runtime hook's decisions for one workload, as table tests: Pods and memory in, actions
out (the hook is pure; ``tests/unit/controller/act/test_executor.py`` covers carrying them out)."""

from __future__ import annotations

import datetime
from dataclasses import replace

import pytest

from compaction.intent import intent_for
from compaction.selector import LabelSelector
from compaction.validation import parse_policy
from compaction.workload import WorkloadType
from controller.drain_planner.readmission import Readmission
from controller.plan.actions import Evict, Patch, RecordEvent
from controller.plan.between_passes import Memory
from controller.plan.convergence import ConvergenceState, fingerprint
from controller.plan.runtime_hook import decide, forget
from controller.snapshot.node import NodeInfo
from controller.snapshot.pod import PodInfo
from controller.snapshot.workload import WorkloadInfo, parse_workload

POLICY = parse_policy({
    "apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
    "metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"setLabelsByEviction": True}})
INTENT = intent_for(POLICY, WorkloadType.DEPLOYMENT)
NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
LATER = NOW + datetime.timedelta(minutes=1)


def _workload(annotations: dict[str, str] | None = None,
              labels: dict[str, str] | None = None, replicas: int = 2) -> WorkloadInfo:
    w = parse_workload(WorkloadType.DEPLOYMENT, {
        "metadata": {"namespace": "shop", "name": "web", "uid": "w1",
                     "annotations": annotations or {}, "labels": labels or {}},
        "spec": {"replicas": replicas}}, {})
    assert w is not None
    return w


def pod(name: str, compliant: bool = False, created: datetime.datetime = NOW,
        ready: bool = True, deleting: bool = False, priority: int | None = None) -> PodInfo:
    labels = dict(INTENT.labels) if compliant else {}
    annotations = {"compactor.dev/intent": INTENT.render()} if compliant else {}
    return PodInfo("shop", name, f"uid-{name}", labels, annotations, ("ReplicaSet", "web-1"),
                   node_name="n1",
                   scheduler_name="compactor-scheduler" if compliant else "default-scheduler",
                   priority=priority, phase="Running", ready=ready, deleting=deleting,
                   created=created)


def _settled_state() -> dict[str, str]:
    """Annotations of a workload whose intent has been stable for longer than the grace."""
    state = ConvergenceState(intent_hash=INTENT.hash,
                             intent_since=NOW - datetime.timedelta(minutes=10))
    return {"compactor.dev/convergence": state.render()}


NO_MEMORY = Memory()


def _step(pods: list[PodInfo], memory: Memory = NO_MEMORY,
          annotations: dict[str, str] | None = None) -> list[object]:
    w = _workload(annotations if annotations is not None else _settled_state())
    return list(decide(w, POLICY, pods, {"n1": {}}, LabelSelector(), memory, NOW).actions)


def test_the_first_non_compliant_pod_by_name_is_evicted_and_state_saved_after() -> None:
    (evict,) = [a for a in _step([pod("b"), pod("a")]) if isinstance(a, Evict)]
    assert (evict.name, evict.pod_uid, evict.workload) == (
        "a", "uid-a", "/apis/apps/v1/namespaces/shop/deployments/web")
    (save,) = evict.then
    assert isinstance(save, Patch)
    state = ConvergenceState.parse(save.body["metadata"]["annotations"])
    assert state.last_eviction == NOW


CASES = [
    ("all compliant", [pod("a", True), pod("b", True)], Memory(), None),
    ("one not ready", [pod("a"), pod("b", ready=False)], Memory(), None),
    ("one terminating", [pod("a"), pod("b", deleting=True)], Memory(), None),
    ("below desired replicas", [pod("a")], Memory(), None),
    ("disruption budget back-off", [pod("a"), pod("b")],
     Memory().blocked("/apis/apps/v1/namespaces/shop/deployments/web", NOW), None),
    ("eviction not yet seen in the cache", [pod("a"), pod("b")],
     Memory().evicting("/apis/apps/v1/namespaces/shop/deployments/web", "uid-a", NOW), None),
    ("eviction seen gone", [pod("a2", True), pod("b")],
     Memory().evicting("/apis/apps/v1/namespaces/shop/deployments/web", "uid-a", NOW), "b"),
    ("placeholder", [pod("a", priority=-10), pod("b", True)], Memory(), None),
]


@pytest.mark.parametrize(("pods", "memory", "victim"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_when_the_hook_replaces_a_pod(pods: list[PodInfo], memory: Memory,
                                      victim: str | None) -> None:
    evicted = [a.name for a in _step(pods, memory) if isinstance(a, Evict)]
    assert evicted == ([victim] if victim else [])


def test_no_replacement_within_the_intent_grace() -> None:
    actions = _step([pod("a"), pod("b")], annotations={})
    assert not any(isinstance(a, Evict) for a in actions)
    (save,) = actions  # the intent was seen for the first time: its time is recorded
    assert isinstance(save, Patch)
    assert ConvergenceState.parse(save.body["metadata"]["annotations"]).intent_since == NOW


def test_the_same_outcome_three_times_suppresses_the_workload_with_an_event() -> None:
    state = ConvergenceState(last_eviction=NOW, intent_hash=INTENT.hash,
                             intent_since=NOW - datetime.timedelta(minutes=10))
    for i in range(2):
        state = state.observe(fingerprint("w1", INTENT, pod("x")), f"old-{i}", NOW)
    replacement = pod("r", created=NOW + datetime.timedelta(seconds=5))
    decision = decide(_workload({"compactor.dev/convergence": state.render()}), POLICY,
                      [replacement, pod("b")], {"n1": {}}, LabelSelector(), Memory(), LATER)
    assert decision.suppressed and decision.newly_suppressed
    (save,) = decision.actions
    assert isinstance(save, Patch)
    assert save.body["metadata"]["labels"] == {"compactor.dev/suppressed": "true"}
    (event,) = save.then
    assert isinstance(event, RecordEvent) and event.body["reason"] == "CompactionSuppressed"


def _after(state: ConvergenceState, pods: list[PodInfo], at: datetime.datetime,
           replicas: int = 3) -> ConvergenceState:
    """The state a pass saves (or the same state when it saves none)."""
    decision = decide(_workload({"compactor.dev/convergence": state.render()}, replicas=replicas),
                      POLICY, pods, {"n1": {}}, LabelSelector(), Memory(), at)
    assert not decision.suppressed
    # The last save wins: the one an eviction carries out after it, if the pass evicts.
    actions = [b for a in decision.actions
               for b in ((a, *a.then) if isinstance(a, Evict) else (a,))]
    saved = [a for a in actions if isinstance(a, Patch)
             and "compactor.dev/convergence" in a.body["metadata"].get("annotations", {})]
    return ConvergenceState.parse(saved[-1].body["metadata"]["annotations"]) if saved else state


EVICTED = ConvergenceState(last_eviction=NOW, intent_hash=INTENT.hash,
                           intent_since=NOW - datetime.timedelta(minutes=10))
SOON = NOW + datetime.timedelta(seconds=1)


def test_pods_a_scale_up_creates_after_an_eviction_count_as_one_outcome() -> None:
    """The webhook unreachable while a workload scales up: three unpatched Pods appear after
    the hook's last eviction, but an eviction has one replacement, so one observation."""
    # (One still starting, so that the pass judges and does not evict again.)
    scaled = [pod(f"new-{i}", created=SOON, ready=i < 2) for i in range(3)]
    state = _after(EVICTED, scaled, LATER)
    assert len(state.observations) == 1 and state.counted == {"uid-new-0"}
    assert state.judged == LATER
    again = _after(state, scaled, LATER + datetime.timedelta(seconds=2))
    assert len(again.observations) == 1  # judged already: the other two are not outcomes


def test_a_compliant_replacement_is_the_outcome_and_later_pods_are_not() -> None:
    replaced = [pod("replacement", compliant=True, created=SOON),
                pod("scaled-later", created=NOW + datetime.timedelta(seconds=30), ready=False)]
    state = _after(EVICTED, replaced, LATER, replicas=2)
    assert state.observations == () and state.judged == LATER


def test_the_next_eviction_waits_for_its_own_outcome() -> None:
    """A pass that judges an outcome and evicts again clears the judgement with the eviction:
    the new replacement is judged in its turn."""
    first = _after(EVICTED, [pod("r1", created=SOON), pod("b")], LATER, replicas=2)
    assert first.last_eviction == LATER and first.judged is None
    assert len(first.observations) == 1
    later = LATER + datetime.timedelta(seconds=5)
    second = _after(first, [pod("r2", created=LATER + datetime.timedelta(seconds=1),
                                ready=False), pod("r1")], later, replicas=2)
    assert len(second.observations) == 2 and second.judged == later


def test_suppression_lifts_when_its_time_is_up() -> None:
    until = ConvergenceState(suppressed_until=NOW).render()
    w = _workload({"compactor.dev/convergence": until}, {"compactor.dev/suppressed": "true"})
    held = decide(w, POLICY, [], {}, LabelSelector(), Memory(),
                  NOW - datetime.timedelta(seconds=1))
    assert held.suppressed and not held.actions
    lifted = decide(w, POLICY, [], {}, LabelSelector(), Memory(), LATER)
    (save,) = lifted.actions
    assert isinstance(save, Patch) and not lifted.suppressed
    assert save.body["metadata"]["labels"] == {"compactor.dev/suppressed": None}
    assert [e.body["reason"] for e in save.then if isinstance(e, RecordEvent)] == [
        "CompactionSuppressionLifted"]


def test_a_workload_no_policy_manages_forgets_its_state_once() -> None:
    patch = forget(_workload(_settled_state(), {"compactor.dev/suppressed": "true"}))
    assert patch is not None and patch.body == {"metadata": {
        "labels": {"compactor.dev/suppressed": None},
        "annotations": {"compactor.dev/convergence": None}}}
    assert forget(_workload({})) is None


ALLOCATABLE = {"cpu": 4000, "memory": 16 * 2**30 * 1000, "pods": 110_000}


def _placed(name: str, node: str, cpu: int) -> PodInfo:
    return replace(pod(name), node_name=node, requests={"cpu": cpu, "memory": 2**30 * 1000})


@pytest.mark.parametrize(("pods", "first", "victim", "skipped"), [
    # "full" is the compaction scheduler's choice for each: a Pod there would come back.
    pytest.param([_placed("a", "full", 500), _placed("b", "thin", 500)],
                 frozenset({"full", "thin"}), "b", 1,
                 id="one-that-would-come-back-is-left-alone"),
    pytest.param([_placed("a", "full", 500), _placed("b", "full", 500)], frozenset({"full"}),
                 None, 2, id="all-would-come-back"),
    # Both would move; only the one on a node the plan frees goes, whatever its name: the
    # other's node stays in use, so its eviction would free nothing.
    pytest.param([_placed("a", "thin", 500), _placed("b", "free", 500)],
                 frozenset({"free"}), "b", 0, id="the-nodes-the-plan-frees-first"),
    pytest.param([_placed("a", "thin", 500), _placed("b", "thin", 500)],
                 frozenset({"free"}), None, 2, id="only-on-the-nodes-the-plan-frees"),
])
def test_the_hook_replaces_only_pods_of_the_nodes_the_plan_frees_whose_replacement_moves(
        pods: list[PodInfo], first: frozenset[str], victim: str | None, skipped: int) -> None:
    nodes = [NodeInfo("full", {}, ALLOCATABLE), NodeInfo("thin", {}, ALLOCATABLE),
             NodeInfo("free", {}, ALLOCATABLE)]
    filler = PodInfo("shop", "filler", "uid-f", {}, {}, ("ReplicaSet", "other"),
                     node_name="full", phase="Running", ready=True, requests={"cpu": 2500})
    readmission = Readmission(nodes, [*pods, filler])
    w = _workload(_settled_state())
    decision = decide(w, POLICY, pods, {n.name: {} for n in nodes}, LabelSelector(), NO_MEMORY,
                      NOW, readmission=readmission, first=first)
    assert [a.name for a in decision.actions if isinstance(a, Evict)] == (
        [victim] if victim else [])
    assert decision.skipped == skipped
