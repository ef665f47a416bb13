"""deploy/prometheus/alerts.yaml with the real promtool: the rules check, and each rule has a
unit test (deploy/prometheus/alerts_test.yaml) where it fires and one where it stays quiet."""

from __future__ import annotations

import subprocess

import yaml

from localcluster.cluster.control_plane import tools_bin
from tests.integration.helpers import ROOT

RULES = ROOT / "deploy" / "prometheus"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(tools_bin() / "promtool"), *args], cwd=RULES,
                          capture_output=True, text=True, timeout=120, check=False)


def _alerts() -> list[str]:
    doc = yaml.safe_load((RULES / "alerts.yaml").read_text())
    return [r["alert"] for g in doc["groups"] for r in g["rules"]]


def test_the_rule_file_checks() -> None:
    out = _promtool("check", "rules", "alerts.yaml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(_alerts())} rules found" in out.stdout


def test_every_rule_has_a_case_that_fires_and_one_that_does_not() -> None:
    tests = yaml.safe_load((RULES / "alerts_test.yaml").read_text())["tests"]
    fires: set[str] = set()
    quiet: set[str] = set()
    for t in tests:
        for case in t.get("alert_rule_test", []):
            (fires if case.get("exp_alerts") else quiet).add(case["alertname"])
    assert fires == set(_alerts()), set(_alerts()) - fires
    assert quiet == set(_alerts()), set(_alerts()) - quiet


def test_promtool_unit_tests_of_the_rules_pass() -> None:
    out = _promtool("test", "rules", "alerts_test.yaml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout and "FAILED" not in out.stdout
