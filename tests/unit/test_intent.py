"""The intent annotation format: rendering, parsing, round trips, and failures reported."""

from __future__ import annotations

import orjson
import pytest

from compaction.intent import Intent, IntentError, intent_for, parse_intent
from compaction.validation import parse_policy
from compaction.workload import WorkloadType


def test_rendered_form_is_compact_with_stable_key_order() -> None:
    intent = Intent("my-policy", {"compactor.dev/policy": "my-policy"}, "compactor-scheduler")
    text = intent.render()
    assert text.startswith('{"v":1,"policy":"my-policy","schedulerName":"compactor-scheduler",'
                           '"labels":{"compactor.dev/policy":"my-policy"},"hash":"')
    body = orjson.loads(text)
    assert list(body) == ["v", "policy", "schedulerName", "labels", "hash"]
    assert len(body["hash"]) == 12 and body["hash"] == intent.hash


def test_descheduler_only_intent_has_no_scheduler_name() -> None:
    p = parse_policy({"metadata": {"name": "d"}, "spec": {"scheduler": {
        "useManagedScheduler": False}}})
    text = intent_for(p, WorkloadType.JOB).render()
    assert orjson.loads(text)["labels"] == {"compactor.dev/policy": "d",
                                            "compactor.dev/workload-kind": "Job"}
    assert "schedulerName" not in orjson.loads(text)
    parsed = parse_intent(text)
    assert parsed.intent is not None and parsed.intent.scheduler_name is None


@pytest.mark.parametrize("intent", [
    Intent("a", {"compactor.dev/policy": "a"}, "compactor-scheduler"),
    Intent("b", {"compactor.dev/policy": "b", "x/y": "z"}, None),
    Intent("c", {}, "kai-scheduler"),
])
def test_round_trip(intent: Intent) -> None:
    parsed = parse_intent(intent.render())
    assert parsed.error is None and parsed.intent == intent


def test_hash_changes_with_content_and_not_with_label_order() -> None:
    a = Intent("p", {"x": "1", "y": "2"}, "s")
    b = Intent("p", {"y": "2", "x": "1"}, "s")
    assert a.hash == b.hash and a.render() == b.render()
    assert Intent("p", {"x": "1"}, "s").hash != Intent("p", {"x": "1"}, "t").hash


@pytest.mark.parametrize(("text", "error"), [
    ("", IntentError.MALFORMED), ("not json", IntentError.MALFORMED),
    ("[1,2]", IntentError.MALFORMED), ('{"v":2,"policy":"p"}', IntentError.UNKNOWN_VERSION),
    ('{"policy":"p"}', IntentError.UNKNOWN_VERSION),
    ('{"v":1,"policy":""}', IntentError.MALFORMED),
    ('{"v":1,"policy":"p","labels":{"a":1}}', IntentError.MALFORMED),
    ('{"v":1,"policy":"p","labels":{},"hash":"000000000000"}', IntentError.HASH_MISMATCH),
    ('{"v":1,"policy":"p","schedulerName":5,"labels":{}}', IntentError.MALFORMED),
])
def test_garbage_and_unknown_versions_are_reported_not_raised(text: str,
                                                              error: IntentError) -> None:
    parsed = parse_intent(text)
    assert parsed.intent is None and parsed.error is error and parsed.detail
