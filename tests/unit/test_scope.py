"""Scope matching: namespace patterns, label selectors, workload kinds and the opt-out."""

from __future__ import annotations

from typing import Any

import pytest

from compaction.policy import Policy
from compaction.precedence import effective_policy
from compaction.scope import in_scope, is_ignored
from compaction.validation import parse_policy
from compaction.workload import Workload, WorkloadType


def _p(spec: dict[str, Any], name: str = "p") -> Policy:
    return parse_policy({"metadata": {"name": name}, "spec": spec})


def _w(ns: str = "production", kind: WorkloadType = WorkloadType.DEPLOYMENT,
       labels: dict[str, str] | None = None, **kw: Any) -> Workload:
    return Workload(kind=kind, namespace=ns, name="w", labels=labels or {}, **kw)


@pytest.mark.parametrize(("operator", "values", "namespace", "expected"), [
    ("In", ["production"], "production", True),
    ("In", ["production"], "production-2", False),
    ("In", ["prod-*"], "prod-eu", True),
    ("In", ["prod-*"], "prod-", True),
    ("In", ["prod-*"], "preprod-eu", False),
    ("In", ["*-batch", "web"], "nightly-batch", True),
    ("NotIn", ["kube-*", "monitoring"], "monitoring", False),
    ("NotIn", ["kube-*", "monitoring"], "kube-public", False),
    ("NotIn", ["kube-*", "monitoring"], "shop", True),
])
def test_namespace_patterns(operator: str, values: list[str], namespace: str,
                            expected: bool) -> None:
    p = _p({"scope": {"namespaceSelector": {"operator": operator, "values": values}}})
    assert in_scope(p, _w(ns=namespace)) is expected


def test_no_namespace_selector_covers_every_namespace() -> None:
    assert in_scope(_p({}), _w(ns="anything"))


def test_label_selector_is_judged_on_workload_labels() -> None:
    p = _p({"scope": {"labelSelector": {"matchLabels": {"tier": "web"}}}})
    assert in_scope(p, _w(labels={"tier": "web"}))
    assert not in_scope(p, _w(labels={"tier": "db"}))
    assert not in_scope(p, _w(template_labels={"tier": "web"}))


def test_workload_types_limit_the_kinds() -> None:
    p = _p({"scope": {"workloadTypes": ["StatefulSet"]}})
    assert in_scope(p, _w(kind=WorkloadType.STATEFUL_SET))
    assert not in_scope(p, _w(kind=WorkloadType.DEPLOYMENT))
    # StrimziPodSet is supported but not in the default list.
    assert not in_scope(_p({}), _w(kind=WorkloadType.STRIMZI_POD_SET))


@pytest.mark.parametrize("where", ["namespace_labels", "labels", "template_labels"])
def test_ignore_label_opts_out_wherever_it_is(where: str) -> None:
    kw: dict[str, Any] = {"labels": {}, where: {"compactor.dev/ignore": "true"}}
    w = _w(**kw)
    assert is_ignored(w)
    assert effective_policy([_p({})], w) is None


def test_ignore_label_must_say_true() -> None:
    w = _w(labels={"compactor.dev/ignore": "false"})
    assert not is_ignored(w)
    assert effective_policy([_p({})], w) is not None


def test_disabled_policy_never_participates() -> None:
    assert effective_policy([_p({"enabled": False, "weight": 100})], _w()) is None
