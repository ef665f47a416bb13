"""The kubelet gives every container Docker-link variables for each Service of its namespace
(``<NAME>_PORT=tcp://…``, ``<NAME>_SERVICE_HOST``, …). Service compactor-webhook yields
COMPACTOR_WEBHOOK_PORT and compactor-controller-metrics COMPACTOR_CONTROLLER_METRICS_PORT,
names of Compactor's own settings, which then refuse to start: its Pods turn them off."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from controller.process.settings import SettingsError
from controller.process.settings import load as controller_settings
from webhook.settings import Settings as WebhookSettings

ROOT = Path(__file__).resolve().parents[2]


def link_variables(service: str, port: int) -> dict[str, str]:
    """What the kubelet sets for ``service`` when service links are on (one TCP port)."""
    name = service.upper().replace("-", "_")
    url = f"tcp://10.0.0.9:{port}"
    return {f"{name}_SERVICE_HOST": "10.0.0.9", f"{name}_SERVICE_PORT": str(port),
            f"{name}_PORT": url, f"{name}_PORT_{port}_TCP": url}


def test_each_service_would_set_a_variable_compactor_reads_and_pods_turn_links_off() -> None:
    services = [yaml.safe_load((ROOT / "deploy" / c / "service.yaml").read_text())
                for c in ("webhook", "controller")]
    links: dict[str, str] = {}
    for s in services:
        links |= link_variables(s["metadata"]["name"], s["spec"]["ports"][0]["port"])
    assert {"COMPACTOR_WEBHOOK_PORT", "COMPACTOR_CONTROLLER_METRICS_PORT"} <= set(links)
    try:
        controller_settings(links)
        refused = ""
    except SettingsError as e:
        refused = str(e)
    assert "COMPACTOR_CONTROLLER_METRICS_PORT" in refused
    with pytest.raises(ValueError, match="COMPACTOR_WEBHOOK_PORT"):
        WebhookSettings.from_env(links)
    for component in ("webhook", "controller"):
        doc = yaml.safe_load((ROOT / "deploy" / component / "deployment.yaml").read_text())
        assert doc["spec"]["template"]["spec"]["enableServiceLinks"] is False, component
