"""A process's memory from /proc: the resident set now never exceeds its high-water mark, and
a process that is gone costs nothing."""

from __future__ import annotations

import os

from localcluster.cluster.procstat import peak_rss_mib, rss_mib


def test_the_resident_set_is_read_now_and_at_its_peak() -> None:
    now, peak = rss_mib(os.getpid()), peak_rss_mib(os.getpid())
    assert 0 < now <= peak


def test_a_process_that_is_gone_reads_as_zero() -> None:
    assert rss_mib(None) == 0.0
    assert peak_rss_mib(None) == 0.0
