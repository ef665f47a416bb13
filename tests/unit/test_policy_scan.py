"""The policy scan's skips (`make lint`, tools/policy-scan.sh): each on an object of deploy/ or
of those the controller renders (tools/render_components.py) is well formed and listed in
docs/install.md; the scan itself runs in `make lint`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _skips(docs: list[Any]) -> dict[str, str]:
    """check id -> reason, of every object."""
    out = {}
    for d in docs:
        if not isinstance(d, dict) or not isinstance(d.get("metadata"), dict):
            continue
        for key, value in (d["metadata"].get("annotations") or {}).items():
            if "checkov.io/skip" in key:
                check, reason = value.split("=")  # as checkov reads it
                assert reason.strip(), key
                out[check] = reason
    return out


def _documented() -> set[str]:
    text = (ROOT / "docs" / "install.md").read_text()
    section = text.split("## The policy scan (checkov)")[1].split("\n## ")[0]
    return set(re.findall(r"`(CKV2?_K8S_\d+)`", section))


def test_every_skip_in_deploy_is_documented() -> None:
    docs = [d for f in sorted((ROOT / "deploy").rglob("*.yaml")) if "helm" not in f.parts
            for d in yaml.safe_load_all(f.read_text())]
    skips = _skips(docs)
    assert "CKV_K8S_155" in skips
    # Every workload has a NetworkPolicy (deploy/network/): none skips it.
    assert "CKV2_K8S_6" not in skips
    assert set(skips) <= _documented()


def test_every_skip_on_the_rendered_objects_is_documented() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "render_components.py")],
                         capture_output=True, text=True, timeout=60, check=True)
    docs = list(yaml.safe_load_all(out.stdout))
    # With the shipped NetworkPolicies that select the scheduler's and the descheduler's Pods,
    # in the same namespace, so that the scan sees them.
    assert {d["kind"] for d in docs} == {"ConfigMap", "Deployment", "CronJob", "NetworkPolicy"}
    assert {d["metadata"]["name"] for d in docs if d["kind"] == "NetworkPolicy"} == {
        "compactor-scheduler", "compactor-descheduler"}
    assert {d["metadata"]["namespace"] for d in docs} == {"compactor-system"}
    skips = _skips(docs)
    assert {"CKV_K8S_114", "CKV_K8S_115"} <= set(skips) and "CKV2_K8S_6" not in skips
    assert set(skips) <= _documented()
