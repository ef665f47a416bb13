"""What a policy's descheduler may evict is one rule read two ways: the planner's ``refusal``
on the facts it reads, and the rendered evictor's label selector on the labels the controller
writes. Generated Pods and selectors hold the two equal; a table names each refusal."""

from __future__ import annotations

from typing import Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction import names
from compaction.descheduler_scope import DeschedulerScope, PodFacts, Refusal
from compaction.safety import evictable_kinds
from compaction.selector import LabelSelector, Operator, Requirement
from compaction.workload import WorkloadType

_KEYS = ("team", "tier")
_VALUES = ("a", "b")


def _written(pod: PodFacts) -> dict[str, str]:
    """The labels ``controller.plan.pod_metadata.pod_patch`` leaves on a managed Pod."""
    out: dict[str, str] = {}
    if pod.policy is not None and pod.kind is not None:
        out[names.POLICY_LABEL] = pod.policy
        out[names.WORKLOAD_KIND_LABEL] = pod.kind.value
    if pod.suppressed:
        out[names.SUPPRESSED_LABEL] = "true"
    if pod.protected:
        out[names.PROTECTED_LABEL] = "true"
    return out


_requirements = st.builds(
    Requirement, st.sampled_from(_KEYS), st.sampled_from(list(Operator)),
    st.lists(st.sampled_from(_VALUES), min_size=1, max_size=2, unique=True).map(tuple))


def _valid(r: Requirement) -> Requirement:
    """Exists and DoesNotExist take no values."""
    return Requirement(r.key, r.operator, () if r.operator in (
        Operator.EXISTS, Operator.DOES_NOT_EXIST) else r.values)


@settings(max_examples=2000, deadline=None)
@given(policy=st.sampled_from(["p", "q", None]), kind=st.sampled_from([*WorkloadType, None]),
       suppressed=st.booleans(), protected=st.booleans(), daemon_sets=st.booleans(),
       evictor=st.lists(_requirements.map(_valid), max_size=2),
       labels=st.dictionaries(st.sampled_from(_KEYS), st.sampled_from(_VALUES)))
def test_the_selector_admits_exactly_the_pods_refusal_lets_through(
        policy: str | None, kind: WorkloadType | None, suppressed: bool, protected: bool,
        daemon_sets: bool, evictor: list[Requirement], labels: dict[str, str]) -> None:
    scope = DeschedulerScope("p", evictable_kinds(daemon_sets), LabelSelector(tuple(evictor)))
    pod = PodFacts(policy, kind, suppressed, protected)
    assert scope.selector().matches({**labels, **_written(pod)}) == (
        scope.refusal(pod, labels) is None)


_TEAM_A: Final = LabelSelector((Requirement("team", Operator.IN, ("a",)),))


@pytest.mark.parametrize(("pod", "labels", "refusal"), [
    (PodFacts("p", WorkloadType.DEPLOYMENT, False, False), {"team": "a"}, None),
    (PodFacts("q", WorkloadType.DEPLOYMENT, False, False), {"team": "a"}, Refusal.OTHER_POLICY),
    (PodFacts(None, WorkloadType.DEPLOYMENT, False, False), {"team": "a"}, Refusal.OTHER_POLICY),
    (PodFacts("p", WorkloadType.DAEMON_SET, False, False), {"team": "a"}, Refusal.KIND),
    (PodFacts("p", None, False, False), {"team": "a"}, Refusal.KIND),
    (PodFacts("p", WorkloadType.STATEFUL_SET, True, True), {}, Refusal.SUPPRESSED),
    (PodFacts("p", WorkloadType.STATEFUL_SET, False, True), {}, Refusal.EVICTOR_SELECTOR),
    (PodFacts("p", WorkloadType.STATEFUL_SET, False, True), {"team": "a"}, Refusal.PROTECTED),
], ids=["evictable", "another-policy", "no-policy", "daemonset", "no-workload",
        "suppressed-first", "evictor-before-protection", "protected"])
def test_refusal_names_the_first_part_of_the_rule_a_pod_fails(
        pod: PodFacts, labels: dict[str, str], refusal: Refusal | None) -> None:
    scope = DeschedulerScope("p", evictable_kinds(False), _TEAM_A)
    assert scope.refusal(pod, labels) is refusal
