"""Where the replacements of evicted Pods land, against the plan, as table tests: the next
new Pod of the workload is the replacement of its oldest departure."""

from __future__ import annotations

import datetime

import pytest

from controller.plan.landings import WAIT, Landings, Mark, Outcome, follow
from controller.snapshot.pod import PodInfo

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
WEB = ("Deployment", "shop", "web")
MARK = Mark(WEB, "p", "dense", frozenset({"sparse", "empty"}))


def _pod(name: str, node: str = "", deleting: bool = False,
         created: datetime.datetime = NOW) -> PodInfo:
    return PodInfo("shop", name, f"u-{name}", node_name=node, phase="Running" if node else
                   "Pending", deleting=deleting, created=created)


def _pass(state: Landings, pods: list[PodInfo], marks: dict[tuple[str, str], Mark] | None = None,
          at: datetime.datetime = NOW) -> tuple[Landings, list[tuple[str, Outcome]]]:
    return follow(state, pods, {p.key: WEB for p in pods}, marks or {}, at)


@pytest.mark.parametrize(("node", "outcome"), [
    ("dense", Outcome.PLANNED), ("other", Outcome.KEPT), ("empty", Outcome.FREE),
    ("sparse", Outcome.FREE)], ids=["as-planned", "another-kept-node", "a-free-node",
                                    "back-where-it-was"])
def test_a_replacement_is_judged_by_where_it_lands(node: str, outcome: Outcome) -> None:
    marked, landed = _pass(Landings(), [_pod("web-a", "sparse")], {("shop", "web-a"): MARK})
    assert landed == [] and marked.marked == {("shop", "web-a"): MARK}
    gone, landed = _pass(marked, [_pod("web-a", "sparse", deleting=True), _pod("web-b", node)])
    assert landed == [("p", outcome)]
    assert gone.of("p") == {o: int(o is outcome) for o in Outcome} and gone.departed == ()


def test_a_replacement_not_yet_bound_is_judged_once_it_is() -> None:
    marked, _ = _pass(Landings(), [_pod("web-a", "sparse")], {("shop", "web-a"): MARK})
    waiting, landed = _pass(marked, [_pod("web-b")])
    assert landed == [] and len(waiting.departed) == 1
    _, landed = _pass(waiting, [_pod("web-b", "dense")])
    assert landed == [("p", Outcome.PLANNED)]


def test_the_oldest_departure_is_matched_first_and_pods_seen_before_are_no_replacements(
        ) -> None:
    other = Mark(WEB, "p", "other", frozenset())
    state, _ = _pass(Landings(), [_pod("web-a", "sparse"), _pod("web-c", "x"),
                                  _pod("web-x", "dense")], {("shop", "web-a"): MARK})
    state, landed = _pass(state, [_pod("web-c", "x"), _pod("web-x", "dense")],
                          {("shop", "web-c"): other})
    assert landed == [] and len(state.departed) == 1
    # web-a left first: the first new Pod is its replacement; web-x was there before.
    state, landed = _pass(state, [_pod("web-b", "dense"), _pod("web-x", "dense")])
    assert landed == [("p", Outcome.PLANNED)] and len(state.departed) == 1
    assert state.departed[0].mark is other


def test_a_departure_nothing_replaces_is_forgotten() -> None:
    state, _ = _pass(Landings(), [_pod("web-a", "sparse")], {("shop", "web-a"): MARK})
    state, _ = _pass(state, [])
    assert len(state.departed) == 1
    later = NOW + WAIT
    state, landed = _pass(state, [_pod("web-b", "dense", created=later)], at=later)
    assert landed == [] and state.departed == ()
