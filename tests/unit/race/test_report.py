"""The race's tables: runs paired by seed under the same conditions only, and the arms'
settings as their users run them."""

from __future__ import annotations

import json
from typing import Any

from localcluster.bench.race import daycycle, report
from localcluster.bench.race.arms import ARMS, Mover, arm, policy_spec, recipe_policy
from localcluster.bench.race.arms import recipe_scheduler_config as recipe_config
from localcluster.bench.race.start import seeded
from localcluster.bench.race.timeline import Eviction, NodeSample, Sample


def record(arm_name: str, seed: int, hours: float, evictions: int, removed: int = 2,
           horizon: float = 240.0, **kw: Any) -> dict[str, Any]:
    metrics = {"node_hours": hours, "dollars": hours / 5, "nodes_start": 12, "nodes_end": 10,
               "claims_end": 10, "in_use_before": 12, "in_use_after": 12 - removed,
               "t50": 30.0, "t90": None, "evictions": {"karpenter": evictions} if evictions
               else {}, "evicted_again": 0, "protected_moved": 0,
               "max_unavailable": {"production/app-0": 1}, "restarted_share": {},
               "pdb_violations": 0, "pending_max": 3.0, "pending_total": 3.0, "launched": 0,
               "launched_by_cause": {}, "karpenter_timeouts": 0,
               "karpenter_failed_validations": 0, "cut": False, "new_pods_by_scheduler": {}}
    return {"arm": arm_name, "seed": seed, "nodes": 12, "catalogue": "one-shape",
            "variant": "native", "order": 0, "horizon": horizon, "load_before": 3.0,
            "load_after": 4.0, "started_at": "", "metrics": metrics, "cycles": [], **kw}


RECORDS = [record("karpenter", s, 0.6 + s / 100, 10) for s in range(1, 8)] + [
    record("compactor", s, 0.7 + s / 100, 4) for s in range(1, 8)] + [
    record("compactor", 9, 0.1, 1),  # no karpenter run on seed 9: no pair
    record("karpenter", 1, 0.1, 1, horizon=600.0),  # another horizon: not paired with 240 s
    record("compactor", 8, 0.1, 1, threshold=90),  # other thresholds: no pair with 65
    record("karpenter", 8, 0.5, 1)]


def test_only_seeds_that_ran_both_arms_under_the_same_conditions_pair() -> None:
    a, b = report.pairs(RECORDS, "compactor", "karpenter", "node-hours")
    assert len(a) == len(b) == 7
    assert all(round(x - y, 6) == 0.1 for x, y in zip(a, b, strict=True))


def test_the_paired_table_gives_the_median_difference_and_the_exact_p() -> None:
    table = report.paired_table(RECORDS, "karpenter")
    row = next(line for line in table.splitlines() if line.startswith("| compactor |"))
    # Seven pairs all one way: p = 2 / 2**7.
    assert "+0.1, p = 0.0156 (n = 7)" in row
    assert "-6, p = 0.0156 (n = 7)" in row  # evictions
    assert "-3, p = 0.0156 (n = 7)" in row  # evictions per net node removed: 4/2 - 10/2
    # node-hours 0.7 + s/100 against 0.6 + s/100: +16.4 % on seed 1 down to +14.9 % on 7.
    assert row.endswith("| +15.6% (+14.9% to +16.4%, n = 7) |"), row


def test_an_arm_run_again_on_a_seed_keeps_only_its_last_record() -> None:
    first, again = record("karpenter", 1, 0.9, 10), record("karpenter", 1, 0.5, 4)
    other = record("karpenter", 1, 0.7, 6, horizon=600.0)  # another condition: kept beside
    records = report.load([json.dumps(first), "", json.dumps(other), json.dumps(again)])
    assert [r["metrics"]["node_hours"] for r in records] == [0.7, 0.5]
    table = report.tables(records)
    assert "| 0.500 |" in table and "| 0.900 |" not in table
    assert "| cycle |" not in table  # no run had day cycles: no table of them


def test_the_matrix_puts_each_seed_in_a_row_and_each_arm_in_a_column() -> None:
    records = [record("karpenter", 1, 0.5, 10), record("control", 1, 2.0, 0),
               record("karpenter", 2, 0.25, 4, removed=0)]
    lines = report.matrix(records, "evictions per net node removed").splitlines()
    assert lines[:3] == ["**12 nodes, one-shape, native, 240 s, thresholds 65 %**", "",
                         "| evictions per net node removed: seed | control | karpenter |"]
    # Seed 2: karpenter removed no node (per net node is undefined); the control did not run.
    assert lines[4:] == ["| 1 | 0 | 5 |", "| 2 | - | - |"]


def test_each_condition_has_its_own_tables_named_after_it() -> None:
    """Sizes are never pooled: a 100-node pair goes to its own table, beside the 12-node one."""
    big = [record("karpenter", 1, 8.0, 150, nodes=100, horizon=600.0),
           record("compactor", 1, 7.0, 90, nodes=100, horizon=600.0)]
    tables = report.paired_table(RECORDS + big, "karpenter").split("\n\n")
    captions = [t.splitlines()[0] for t in tables if t.startswith("**")]
    # The 600 s condition at 12 nodes ran karpenter alone, and the one at thresholds 90 no
    # karpenter: no table for either.
    assert captions == ["**12 nodes, one-shape, native, 240 s, thresholds 65 %**",
                        "**100 nodes, one-shape, native, 600 s, thresholds 65 %**"]
    assert "(n = 7)" in tables[1] and "(n = 1)" in tables[3]
    assert report.label((30, "kwok", "native", 600.0, 2, 65)).endswith(", 2 day cycles")


def test_the_per_seed_table_flags_a_cut_run_and_records_the_load() -> None:
    cut = record("control", 1, 0.7, 0)
    cut["metrics"]["cut"] = True
    line = report.per_seed([cut]).splitlines()[-1]
    assert "| cut |" in line and "3.0 / 4.0" in line and "12 → 10 (2)" in line


def test_every_arm_the_race_names_and_how_each_is_set() -> None:
    assert [a.name for a in ARMS] == [
        "karpenter", "karpenter-balanced", "karpenter+admission", "recipe",
        "compactor-in-place", "compactor-by-eviction", "compactor-defaults", "control"]
    # Karpenter's default budget (10 %) wherever it runs: no budgets rendered.
    assert all("budgets" not in a.consolidation.render() for a in ARMS)
    assert arm("karpenter-balanced").consolidation.policy == "Balanced"
    assert arm("control").consolidation.policy == "WhenEmpty" and arm("control").cadence is None
    assert arm("recipe").cadence == arm("compactor-in-place").cadence == 120.0
    assert arm("compactor-defaults").cadence == 1800.0
    assert policy_spec(Mover.ADMISSION)["descheduler"] == {"enabled": False}
    assert "descheduler" not in policy_spec(Mover.DEFAULTS)
    assert policy_spec(Mover.BY_EVICTION)["setLabelsByEviction"] is True
    assert policy_spec(Mover.IN_PLACE)["setLabelsByEviction"] is False


def test_the_recipe_has_compactors_limits_its_scheduler_profile_and_mandatory_no_eviction() -> None:
    spec = policy_spec(Mover.IN_PLACE)["descheduler"]
    policy = recipe_policy()
    for limit in ("maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace",
                  "maxNoOfPodsToEvictTotal"):
        assert policy[limit] == spec[limit]
    evictor = policy["profiles"][0]["pluginConfig"][0]
    assert evictor["args"]["noEvictionPolicy"] == "Mandatory"
    # One threshold for both, whichever is set.
    assert policy["profiles"][0]["pluginConfig"][1]["args"]["thresholds"] == \
        spec["highNodeUtilization"]["thresholds"] == {"cpu": 65, "memory": 65, "pods": 65}
    tuned = policy_spec(Mover.BY_EVICTION, 90)["descheduler"]["highNodeUtilization"]
    assert tuned["thresholds"] == recipe_policy(90)["profiles"][0]["pluginConfig"][1][
        "args"]["thresholds"] == {"cpu": 90, "memory": 90, "pods": 90}
    profile = recipe_config("/kubeconfig")["profiles"][0]
    assert profile["schedulerName"] == "default-scheduler"
    assert {"name": "NodeResourcesBalancedAllocation"} in profile["plugins"]["score"]["disabled"]


def test_a_day_cycle_rises_rolls_bursts_and_falls_in_order() -> None:
    start = seeded(12, 1)
    actions = daycycle.plan(start, 2, 100.0, 1)
    kinds = [a.kind for a in actions if a.at < 100]
    assert kinds.index(daycycle.Kind.ROLL) > 0 and kinds.count(daycycle.Kind.ROLL) == 2
    assert kinds.index(daycycle.Kind.JOBS) < kinds.index(daycycle.Kind.JOBS_DONE)
    assert kinds[-1] is daycycle.Kind.SCALE
    assert [a.at for a in actions] == sorted(a.at for a in actions)
    assert sum(a.kind is daycycle.Kind.JOBS for a in actions) == 2


def test_windows_cut_the_timeline_into_cycles_each_timed_from_its_start() -> None:
    samples = [Sample(t, (NodeSample("n", "x"),), 1, (), ()) for t in (0.0, 60.0, 120.0, 180.0)]
    evictions = [Eviction(70.0, "a", "p", "karpenter")]
    (first, e1), (second, e2) = daycycle.windows(samples, evictions, 2, 100.0)
    assert [s.t for s in first] == [0.0, 60.0] and [e.t for e in e1] == [70.0]
    # The second cycle counts from the sample before it (60 s, its nodes at 100 s).
    assert [s.t for s in second] == [0.0, 20.0, 80.0] and e2 == []
    ((_, late),) = daycycle.windows(samples, [Eviction(150.0, "a", "p", "x")], 2, 100.0)[1:]
    assert [e.t for e in late] == [50.0]
