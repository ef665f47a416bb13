"""Files in deploy/ made from others (the chart's CRDs, its value-free templates, rules and
dashboard, the operator overlay's PrometheusRule) match their sources: sync_deploy --check."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_generated_deploy_files_are_up_to_date() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "sync_deploy.py"), "--check"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr


def test_the_operator_rule_is_the_rule_file() -> None:
    rule = yaml.safe_load(
        (ROOT / "deploy/overlays/prometheus-operator/prometheusrule.yaml").read_text())
    assert rule["kind"] == "PrometheusRule"
    assert rule["spec"] == yaml.safe_load((ROOT / "deploy/prometheus/alerts.yaml").read_text())


def test_the_check_notices_a_missing_copy_and_an_orphan(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("sync_deploy", ROOT / "tools/sync_deploy.py")
    assert spec is not None and spec.loader is not None
    sync_deploy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sync_deploy)
    chart = tmp_path / "chart"
    (chart / "crds").mkdir(parents=True)
    (chart / "crds" / "orphan.yaml").write_text("kind: CustomResourceDefinition\n")
    monkeypatch.setattr(sync_deploy, "CHART", chart)
    problems = sync_deploy.stale()
    assert any("orphan.yaml (no source" in p for p in problems)
    assert any(p.endswith("crds/compactor.dev_clustercompactionpolicies.yaml") for p in problems)
