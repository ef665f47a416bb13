"""A real Prometheus on loopback that scrapes Compactor's /metrics, and its HTTP API.

Static scrape configs only (the local cluster's Pods have no reachable IPs; the webhook and
controller run as local processes). Used by the observability tests and the dashboard picture.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from localcluster.cluster.process import Process, free_port


@dataclass(frozen=True)
class Target:
    """One /metrics endpoint; ``ca_file`` and ``server_name`` for HTTPS."""

    job: str
    address: str  # host:port
    scheme: str = "http"
    ca_file: Path | None = None
    server_name: str | None = None


@dataclass(frozen=True)
class Series:
    labels: dict[str, str]
    points: list[tuple[float, float]]  # (unix time, value); one point for an instant query


class QueryError(RuntimeError):
    """Prometheus refused a query (its message says why: usually a PromQL syntax error)."""


def config(targets: Sequence[Target], interval: float,
           rule_files: Sequence[Path] = ()) -> dict[str, Any]:
    """prometheus.yml: one job per ``Target.job`` (its targets share scheme and TLS)."""
    jobs: dict[str, dict[str, Any]] = {}
    for t in targets:
        job = jobs.setdefault(t.job, {"job_name": t.job, "scheme": t.scheme,
                                      "static_configs": [{"targets": []}]})
        job["static_configs"][0]["targets"].append(t.address)
        if t.scheme == "https":
            tls: dict[str, Any] = {}
            if t.ca_file is not None:
                tls["ca_file"] = str(t.ca_file)
            if t.server_name:
                tls["server_name"] = t.server_name
            job["tls_config"] = tls
    return {"global": {"scrape_interval": f"{interval:g}s", "scrape_timeout": f"{interval:g}s",
                       "evaluation_interval": f"{interval:g}s"},
            "rule_files": [str(f) for f in rule_files], "scrape_configs": list(jobs.values())}


class Prometheus:
    def __init__(self, binary: Path, workdir: Path, targets: Sequence[Target],
                 interval: float = 1.0, rule_files: Sequence[Path] = ()) -> None:
        self.binary, self.dir, self.targets = binary, workdir, list(targets)
        self.interval, self.rule_files = interval, list(rule_files)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: Process | None = None
        self._http = httpx.Client(base_url=self.url, timeout=30)

    def start(self, timeout: float = 60.0) -> Process:
        self.dir.mkdir(parents=True, exist_ok=True)
        file = self.dir / "prometheus.yml"
        file.write_text(yaml.safe_dump(config(self.targets, self.interval, self.rule_files)))
        self.process = Process("prometheus", [
            str(self.binary), f"--config.file={file}",
            f"--storage.tsdb.path={self.dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            self.dir / "prometheus.log")
        self.process.start()
        self.process.wait_healthy(
            lambda: self._http.get("/-/ready").status_code == 200, timeout)
        return self.process

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
        self._http.close()

    def _api(self, path: str, params: dict[str, str]) -> Any:
        resp = self._http.get(path, params=params)
        body = resp.json()
        if body.get("status") != "success":
            raise QueryError(f"{params.get('query', path)}: {body.get('error', resp.text)}")
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[Series]:
        params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {})}
        data = self._api("/api/v1/query", params)
        if data["resultType"] == "scalar":
            return [Series({}, [(float(data["result"][0]), float(data["result"][1]))])]
        return [Series(r["metric"], [(float(r["value"][0]), float(r["value"][1]))])
                for r in data["result"]]

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[Series]:
        data = self._api("/api/v1/query_range", {
            "query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"})
        return [Series(r["metric"], [(float(t), float(v)) for t, v in r["values"]])
                for r in data["result"]]

    def rules(self) -> list[dict[str, Any]]:
        groups: list[dict[str, Any]] = self._api("/api/v1/rules", {})["groups"]
        return [rule for g in groups for rule in g["rules"]]

    def wait_for_scrapes(self, count: int = 2, since: float | None = None,
                         timeout: float = 60.0) -> None:
        """Until every target has been scraped successfully ``count`` times after ``since``."""
        since = time.time() if since is None else since
        seen: dict[str, set[str]] = {}
        deadline = time.monotonic() + timeout
        while True:
            for t in self._api("/api/v1/targets", {"state": "active"})["activeTargets"]:
                last = t.get("lastScrape", "")
                if t.get("health") == "up" and _unix(last) > since:
                    seen.setdefault(t["scrapeUrl"], set()).add(last)
            if len(seen) == len(self.targets) and all(len(s) >= count for s in seen.values()):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"not every target scraped {count} times since {since}: "
                                   f"{ {k: len(v) for k, v in seen.items()} }")
            time.sleep(self.interval / 4)


def _unix(text: str) -> float:
    """Prometheus' lastScrape (RFC 3339, nanoseconds) as Unix time; 0 when never scraped."""
    if not text or text.startswith("0001-"):
        return 0.0
    head, dot, rest = text.partition(".")
    if not dot:
        return datetime.datetime.fromisoformat(text).timestamp()
    digits = len(rest) - len(rest.lstrip("0123456789"))
    base = datetime.datetime.fromisoformat(head + rest[digits:]).timestamp()
    return base + float("0." + (rest[:digits] or "0"))
