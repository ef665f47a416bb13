"""A locust swarm against one webhook on loopback (``locustfile.py`` is its user), kept off the
server's CPU so that the two do not compete for one core."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER_CPU, LOCUST_CPU = 0, 1


def pinned(cpu: int, argv: list[str]) -> list[str]:
    """``argv`` run on one CPU, where the machine has taskset and more than one CPU."""
    if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        return ["taskset", "-c", str(cpu), *argv]
    return argv


def run(port: int, bodies: Path, users: int, seconds: int, rate: float,
        prefix: Path) -> dict[str, float]:
    """Headless locust posting ``bodies`` to ``https://127.0.0.1:<port>``; its aggregated
    figures (client-side latencies in ms), read from the CSV it writes under ``prefix``."""
    env = {**os.environ, "BODIES": str(bodies), "RATE": str(rate)}
    subprocess.run(pinned(LOCUST_CPU, [
        sys.executable, "-m", "locust", "-f", str(ROOT / "loadtest" / "locustfile.py"),
        "--headless", "-u", str(users), "-r", str(users), "-t", f"{seconds}s",
        "--host", f"https://127.0.0.1:{port}", "--csv", str(prefix), "--only-summary",
        "--loglevel", "WARNING", "--stop-timeout", "2"]),
        env=env, check=False, capture_output=True, timeout=seconds + 60)
    with open(f"{prefix}_stats.csv") as f:
        row = next(r for r in csv.DictReader(f) if r["Name"] == "Aggregated")
    return {"rps": float(row["Requests/s"]), "p50": float(row["50%"]),
            "p95": float(row["95%"]), "p99": float(row["99%"]),
            "failures": float(row["Failure Count"]), "requests": float(row["Request Count"])}
