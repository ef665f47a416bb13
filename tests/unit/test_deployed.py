"""The pieces of the real-node compaction that need no cluster: a descheduler log's
evictions, when a run reached its nodes, the scenario on kwok, the images' listing."""

from __future__ import annotations

import datetime
from pathlib import Path

from localcluster.cluster.stack import evicted_pods
from localcluster.demo.real_node import Progress, every_minute, images
from localcluster.demo.scenario import on_kwok, standard
from localcluster.node.cluster import KWOK_TOLERATION


def test_a_descheduler_log_names_each_eviction_and_its_node() -> None:
    log = "\n".join([
        'I1204 "Evicted pod" pod="production/web-1" reason="" strategy="HighNodeUtilization" '
        'node="node-03"',
        'I1204 "Number of evicted pods" totalEvicted=1',
        'I1204 "Evicted pod" pod="batch/worker-2"',
    ])
    assert evicted_pods(log) == [("production/web-1", "node-03"), ("batch/worker-2", "")]


def test_progress_counts_from_the_last_time_the_nodes_were_reached() -> None:
    start = datetime.datetime(2026, 12, 4, 18, 0, tzinfo=datetime.UTC)
    progress = Progress.__new__(Progress)
    progress.samples = [(start + datetime.timedelta(seconds=s), n)
                        for s, n in ((10, 12), (20, 7), (30, 8), (40, 7), (50, 7))]
    assert progress.reached(7, start) == 40.0
    assert progress.reached(6, start) is None


def test_the_scenario_on_kwok_tolerates_and_selects_the_kwok_nodes() -> None:
    scenario = on_kwok(standard())
    assert scenario.pod_spec == {"tolerations": [KWOK_TOLERATION],
                                 "nodeSelector": {"type": "kwok"}}
    assert standard().pod_spec == {}
    policy = every_minute(scenario)["descheduler"]
    assert policy["interval"] == "* * * * *"
    assert policy["maxNoOfPodsToEvictTotal"] == 1


def test_images_reads_the_listing(tmp_path: Path) -> None:
    (tmp_path / "images.txt").write_text("compactor-1.tar compactor:1\npause.tar pause:3\n")
    assert images(tmp_path) == {tmp_path / "compactor-1.tar": "compactor:1",
                                tmp_path / "pause.tar": "pause:3"}
