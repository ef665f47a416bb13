"""The side-by-side table of repeated compaction runs counts each target as it was met."""

from __future__ import annotations

from dataclasses import replace

from localcluster.demo.measure import Report, disruption_table, repeats_table

BASE = Report(nodes_before=12, nodes_after=7, in_use_before=12, in_use_after=7,
              ffd_around_blockers=7, ffd_packing=6, lower_bound=5, runtime_evictions=25,
              descheduler_evictions=4, late_evictions=0, bounced=0, evictions_off_freed=4,
              movable_on_freed=10, descheduler_runs=5, seconds=21.4, pdb_violations=0,
              protected_moved=0, nodes_total=12)


def test_each_target_is_counted_over_the_runs() -> None:
    runs = [replace(BASE, landings={"planned_node": 3, "kept_node": 1}),
            replace(BASE, nodes_after=6, late_evictions=2, descheduler_evictions=12,
                    landings={"planned_node": 9, "free_node": 3})]
    table = repeats_table(runs)
    lines = table.splitlines()
    assert lines[2] == "| 1 | 7 | 7 | 6 | 5 | 0 | 4 / 10 | 3 / 1 / 0 | 0, 0 | 21 s |"
    assert lines[3] == "| 2 | 6 | 7 | 6 | 5 | 2 | 12 / 10 | 9 / 0 / 3 | 0, 0 | 21 s |"
    assert lines[-1] == ("nodes after = packing around unmovable Pods: 1 of 2; = FFD packing: "
                         "1 of 2; 0 futile: 1 of 2; 0 landings on a free node: 1 of 2; "
                         "evictions <= movable Pods of freed nodes: 1 of 2")


def test_evictions_per_net_node_removed_count_nodes_as_the_forecast_counts() -> None:
    r = replace(BASE, evictions=12, kept_before=12, kept_after=8)
    assert (r.net_removed, r.per_net_removed) == (4, 3.0)
    assert replace(r, kept_after=12).per_net_removed is None  # nothing removed
    assert replace(r, kept_after=13).per_net_removed is None  # a node more
    assert replace(BASE, kept_after=8).per_net_removed is None  # evictions not seen


def test_the_disruption_table_shows_each_run_and_the_medians() -> None:
    runs = [replace(BASE, evictions=29, came_back=0, kept_before=12, kept_after=7,
                    evictions_from_kept=20),
            replace(BASE, evictions=30, came_back=2, kept_before=12, kept_after=8,
                    nodes_after=8, came_back_by={"production/web": 2}),
            replace(BASE, evictions=24, came_back=0, kept_before=12, kept_after=6)]
    lines = disruption_table(runs).splitlines()
    assert lines[2] == "| 1 | 29 (4 / 25) | 20 | 0 | 12 → 7 | 5.8 | 7 |"
    assert lines[3] == "| 2 | 30 (4 / 25) | - | 2 (production/web 2) | 12 → 8 | 7.5 | 8 |"
    assert lines[-1] == ("came back 0: 2 of 3; medians: evictions per net node removed 5.8, "
                         "nodes after counted alike 7, nodes carrying managed Pods after 7, "
                         "came back 0")
