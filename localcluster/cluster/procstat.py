"""What a local process costs, from /proc: CPU seconds and resident memory, now and at peak."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_seconds(pid: int | None) -> float:
    """User plus system CPU time so far; 0 once the process is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _status_mib(pid: int | None, field: str) -> float:
    """A memory field of /proc/<pid>/status (given there in KiB), in MiB; 0 once gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def rss_mib(pid: int | None) -> float:
    """VmRSS, the resident set now, in MiB; 0 once the process is gone."""
    return _status_mib(pid, "VmRSS")


def peak_rss_mib(pid: int | None) -> float:
    """VmHWM, the resident set's high-water mark, in MiB; 0 once the process is gone."""
    return _status_mib(pid, "VmHWM")
