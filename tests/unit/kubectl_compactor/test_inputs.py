"""The files a person gives the plugin: policy documents through the controller's validation, and
price files."""

from __future__ import annotations

from typing import Any

import pytest

from kubectl_compactor import inputs
from tests.unit.kubectl_compactor.test_report import policy_doc


@pytest.mark.parametrize(("docs", "problems"), [
    ([policy_doc()], []),
    ([None, policy_doc()], []),
    ([policy_doc(apiVersion="v1")], ["f#1: ClusterCompactionPolicy/spread: apiVersion: must be "
                               "compactor.dev/v1alpha1"]),
    ([policy_doc(kind="ConfigMap")], ["f#1: ConfigMap/spread: kind: must be "
                                "ClusterCompactionPolicy or CompactionPolicy"]),
    ([policy_doc(spec={"weight": "heavy", "descheduler": {"maxNoOfPodsToEvictPerNode": -1}})],
     ["f#1: ClusterCompactionPolicy/spread: spec.weight: ",
      "f#1: ClusterCompactionPolicy/spread: spec.descheduler.maxNoOfPodsToEvictPerNode: "]),
    (["text"], ["f#1: (document): is a str, not an object"]),
])
def test_policy_documents_go_through_the_controllers_validation(
        docs: list[Any], problems: list[str]) -> None:
    chosen = inputs.read_documents((f"f#{i}", d) for i, d in enumerate(docs, 1))
    assert len(chosen.problems) == len(problems), chosen.problems
    for line, start in zip(chosen.problems, problems, strict=True):
        assert line.startswith(start), line


def test_a_namespaced_policy_without_a_namespace_lands_in_default() -> None:
    chosen = inputs.read_documents([("f#1", policy_doc(kind="CompactionPolicy"))])
    assert not chosen.problems
    assert chosen.policies[0].namespace == "default"


@pytest.mark.parametrize(("raw", "by_type", "problems"), [
    ({"m5.large": 0.096, "c5.xlarge": 1}, {"m5.large": 0.096, "c5.xlarge": 1.0}, 0),
    ({"m5.large": "cheap", "x": -1, "y": True}, {}, 3),
    (["m5.large"], {}, 1),
])
def test_price_files(raw: Any, by_type: dict[str, float], problems: int) -> None:
    found, said = inputs.parse_prices(raw, "prices.yaml")
    assert found == by_type and len(said) == problems
