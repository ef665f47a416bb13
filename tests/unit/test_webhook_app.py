"""The /mutate endpoint in-process, with the API server's GET replaced by FakeApi (the boundary
under test here; tests/integration/test_webhook.py drives the same code from the real one)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
import pytest_asyncio
from starlette.types import Message

from compaction.intent import Intent
from tests.unit.webhook_fakes import (
    DEPLOY,
    INTENT,
    RS,
    FakeApi,
    deployment_chain,
    failing,
    pod,
    review,
)
from webhook.admission import Admitter, Outcome
from webhook.metrics import Metrics
from webhook.owners import OwnerCache
from webhook.review import OwnerRef
from webhook.server import Webhook
from webhook.settings import Settings


class Harness:
    def __init__(self, api: FakeApi, budget: float = 2.0) -> None:
        self.api = api
        self.webhook = Webhook(Settings(budget_seconds=budget), reader=api)
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(app=self.webhook.app),
                                        base_url="http://webhook")

    async def admit(self, body: bytes) -> dict[str, Any]:
        resp = await self.client.post("/mutate", content=body)
        assert resp.status_code == 200, resp.text
        out: dict[str, Any] = resp.json()["response"]
        return out

    async def patch(self, body: bytes) -> list[dict[str, Any]]:
        resp = await self.admit(body)
        assert resp["allowed"] is True
        if "patch" not in resp:
            return []
        assert resp["patchType"] == "JSONPatch"
        ops: list[dict[str, Any]] = orjson.loads(base64.b64decode(resp["patch"]))
        return ops

    async def metric(self, name: str, **labels: str) -> float:
        value = self.webhook.metrics.registry.get_sample_value(name, labels)
        return value or 0.0


@pytest_asyncio.fixture
async def api() -> FakeApi:
    fake = FakeApi()
    deployment_chain(fake)
    return fake


@pytest_asyncio.fixture
async def hook(api: FakeApi) -> AsyncIterator[Harness]:
    h = Harness(api)
    yield h
    await h.client.aclose()


@pytest.mark.asyncio
async def test_pod_of_an_annotated_deployment_is_patched(hook: Harness) -> None:
    body = review(pod())
    resp = await hook.admit(body)
    assert resp["uid"] == orjson.loads(body)["request"]["uid"]
    ops = await hook.patch(review(pod()))
    assert {"op": "add", "path": "/spec/schedulerName", "value": "compactor-scheduler"} in ops
    assert {"op": "add", "path": "/metadata/labels",
            "value": {"compactor.dev/policy": "web-policy"}} in ops
    assert await hook.metric("compactor_admission_requests_total", outcome="patched") == 2


@pytest.mark.asyncio
async def test_dry_run_gets_the_same_patch(hook: Harness) -> None:
    dry = await hook.patch(review(pod(), dry_run=True))
    assert dry and dry == await hook.patch(review(pod()))


@pytest.mark.asyncio
async def test_job_pod_falls_back_to_the_annotated_cronjob(api: FakeApi, hook: Harness) -> None:
    cron = OwnerRef("batch/v1", "CronJob", "nightly", "uid-cron")
    job = OwnerRef("batch/v1", "Job", "nightly-123", "uid-job")
    api.add("shop", cron, {"compactor.dev/intent": INTENT.render()})
    api.add("shop", job, parent=cron)
    ops = await hook.patch(review(pod(owner=job)))
    assert any(op["path"] == "/spec/schedulerName" for op in ops)


@pytest.mark.asyncio
async def test_a_replicasets_copy_of_intent_is_never_read(api: FakeApi, hook: Harness) -> None:
    stale = Intent("old", {"compactor.dev/policy": "old"}, "other-scheduler")
    api.add("shop", RS, {"compactor.dev/intent": stale.render()}, parent=DEPLOY)
    ops = await hook.patch(review(pod()))
    assert {"op": "add", "path": "/spec/schedulerName", "value": "compactor-scheduler"} in ops
    # The Deployment dropped its intent: the ReplicaSet's stale copy must not be used.
    api.add("shop", DEPLOY, {})
    hook.webhook.cache._cache.clear()
    assert await hook.patch(review(pod())) == []


@pytest.mark.asyncio
async def test_a_cronjobs_job_is_never_read_for_intent(api: FakeApi, hook: Harness) -> None:
    cron = OwnerRef("batch/v1", "CronJob", "nightly", "uid-cron")
    job = OwnerRef("batch/v1", "Job", "nightly-123", "uid-job")
    api.add("shop", cron, {})
    api.add("shop", job, {"compactor.dev/intent": INTENT.render()}, parent=cron)
    assert await hook.patch(review(pod(owner=job))) == []
    standalone = OwnerRef("batch/v1", "Job", "once", "uid-once")
    api.add("shop", standalone, {"compactor.dev/intent": INTENT.render()})
    assert any(op["path"] == "/spec/schedulerName"
               for op in await hook.patch(review(pod(owner=standalone))))


# Each with the outcome it is counted under: an owner of a kind with no intent is looked at
# and found to have none, the rest are skipped before any lookup.
SKIPS = [
    ("mirror-pod", lambda: review(pod(annotations={"kubernetes.io/config.mirror": "x"})),
     "skipped"),
    ("kube-system", lambda: review(pod(ns="kube-system"), namespace="kube-system"), "skipped"),
    ("compactor-system", lambda: review(pod(ns="compactor-system"),
                                        namespace="compactor-system"), "skipped"),
    ("pod-opted-out", lambda: review(pod(labels={"compactor.dev/ignore": "true"})), "skipped"),
    ("bare-pod", lambda: review(pod(owner=None)), "skipped"),
    ("update", lambda: review(pod(), operation="UPDATE"), "skipped"),
    ("delete", lambda: review(None, operation="DELETE"), "skipped"),
    ("not-a-pod", lambda: review({"metadata": {}}, kind="Deployment", group="apps"), "skipped"),
    ("unsupported-owner-kind", lambda: review(pod(owner=OwnerRef("v1", "Node", "n", "u"))),
     "unchanged"),
]


@pytest.mark.parametrize(("make", "outcome"), [(m, o) for _, m, o in SKIPS],
                         ids=[i for i, _, _ in SKIPS])
@pytest.mark.asyncio
async def test_skipped_requests_are_allowed_unchanged(hook: Harness, make: Any,
                                                      outcome: str) -> None:
    assert await hook.patch(make()) == []
    assert await hook.metric("compactor_admission_requests_total", outcome=outcome) == 1
    assert await hook.metric("compactor_admission_requests_total", outcome="failed_open") == 0


@pytest.mark.asyncio
async def test_opted_out_namespace_is_skipped(api: FakeApi, hook: Harness) -> None:
    api.add_namespace("shop", {"compactor.dev/ignore": "true"})
    assert await hook.patch(review(pod())) == []
    assert await hook.metric("compactor_admission_requests_total", outcome="skipped") == 1


@pytest.mark.asyncio
async def test_the_webhooks_own_namespace_is_skipped_whichever_it_is(api: FakeApi) -> None:
    """Installed in ``shop`` (its Service's namespace, from the downward API): the Pod that
    would be patched there is Compactor's own namespace's, so it is left alone, even if the
    webhook configuration's namespaceSelector let it through."""
    settings = Settings.from_env({"COMPACTOR_WEBHOOK_SERVICE_NAMESPACE": "shop"})
    assert settings.protected_namespaces == {"kube-system", "shop"}
    webhook = Webhook(settings, reader=api)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=webhook.app),
                                 base_url="http://webhook") as client:
        resp = (await client.post("/mutate", content=review(pod()))).json()["response"]
    assert resp["allowed"] is True and "patch" not in resp
    assert webhook.metrics.registry.get_sample_value(
        "compactor_admission_requests_total", {"outcome": "skipped"}) == 1


@pytest.mark.asyncio
async def test_opted_out_owner_is_skipped(api: FakeApi, hook: Harness) -> None:
    api.add("shop", DEPLOY, {"compactor.dev/intent": INTENT.render()},
            labels={"compactor.dev/ignore": "true"})
    assert await hook.patch(review(pod())) == []
    assert await hook.metric("compactor_admission_requests_total", outcome="skipped") == 1


@pytest.mark.asyncio
async def test_suppressed_workload_still_gets_its_scheduler(api: FakeApi, hook: Harness) -> None:
    api.add("shop", DEPLOY, {"compactor.dev/intent": INTENT.render()},
            labels={"compactor.dev/suppressed": "true"})
    assert any(op["path"] == "/spec/schedulerName" for op in await hook.patch(review(pod())))


@pytest.mark.asyncio
async def test_gpu_scheduler_is_kept_and_counted(hook: Harness) -> None:
    ops = await hook.patch(review(pod(scheduler="kai-scheduler")))
    assert ops and not any(op["path"] == "/spec/schedulerName" for op in ops)
    assert await hook.metric("compactor_gpu_scheduler_overrides_total",
                             scheduler="kai-scheduler") == 1


MALFORMED = [
    ("empty", b"", 400), ("not-json", b"{nope", 400), ("array", b"[]", 400),
    ("wrong-api-version", orjson.dumps({"apiVersion": "admission.k8s.io/v1beta1",
                                        "kind": "AdmissionReview", "request": {}}), 400),
    ("no-request", orjson.dumps({"apiVersion": "admission.k8s.io/v1",
                                 "kind": "AdmissionReview"}), 400),
    ("no-uid", orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                             "request": {"kind": {}, "operation": "CREATE"}}), 400),
    ("oversized", b"{" + b" " * (3 * 1024 * 1024 + 1) + b"}", 413),
]


@pytest.mark.parametrize(("body", "status"), [(b, s) for _, b, s in MALFORMED],
                         ids=[i for i, _, _ in MALFORMED])
@pytest.mark.asyncio
async def test_malformed_bodies_get_a_clear_http_error(hook: Harness, body: bytes,
                                                       status: int) -> None:
    resp = await hook.client.post("/mutate", content=body)
    assert resp.status_code == status
    assert resp.json()["error"]


@pytest.mark.parametrize(("body", "reason"), [
    (b"{nope", "malformed_review"), (b"{" + b" " * (3 * 1024 * 1024 + 1) + b"}", "too_large")])
@pytest.mark.asyncio
async def test_rejected_bodies_are_counted(hook: Harness, body: bytes, reason: str) -> None:
    await hook.client.post("/mutate", content=body)
    assert await hook.metric("compactor_admission_rejected_total", reason=reason) == 1
    assert await hook.metric("compactor_admission_requests_total", outcome="rejected") == 1


HOSTILE_REFS = [
    ("query-in-name", OwnerRef("apps/v1", "ReplicaSet", "web?watch=true", "u")),
    ("fragment-in-name", OwnerRef("apps/v1", "ReplicaSet", "x#frag", "u")),
    ("escaped-dots", OwnerRef("apps/v1", "ReplicaSet", "%2e%2e", "u")),
    ("dot-dot", OwnerRef("apps/v1", "ReplicaSet", "..", "u")),
    ("slash-in-name", OwnerRef("apps/v1", "ReplicaSet", "a/b", "u")),
    ("upper-case", OwnerRef("apps/v1", "ReplicaSet", "Web", "u")),
    ("too-long", OwnerRef("apps/v1", "ReplicaSet", "x" * 254, "u")),
    ("climbing-api-version", OwnerRef("apps/../v1", "ReplicaSet", "web-abc", "u")),
    ("path-in-api-version", OwnerRef("apps/v1/namespaces/x/../..", "ReplicaSet", "web", "u")),
]


@pytest.mark.parametrize("ref", [r for _, r in HOSTILE_REFS], ids=[i for i, _ in HOSTILE_REFS])
@pytest.mark.asyncio
async def test_an_owner_reference_cannot_steer_the_lookup(api: FakeApi, hook: Harness,
                                                          ref: OwnerRef) -> None:
    assert await hook.patch(review(pod(owner=ref))) == []
    assert api.gets == ["/api/v1/namespaces/shop"], "nothing but the namespace was asked for"
    assert await hook.metric("compactor_owner_lookups_total", result="invalid") == 1
    assert await hook.metric("compactor_admission_failed_open_total",
                             reason="invalid_owner") == 1


@pytest.mark.asyncio
async def test_a_dotted_owner_name_is_a_valid_lookup(api: FakeApi, hook: Harness) -> None:
    dotted = OwnerRef("apps/v1", "ReplicaSet", "web.v2-abc", "uid-dotted")
    api.add("shop", dotted, parent=DEPLOY)
    assert await hook.patch(review(pod(owner=dotted)))
    assert "/apis/apps/v1/namespaces/shop/replicasets/web.v2-abc" in api.gets


@pytest.mark.asyncio
async def test_another_groups_kind_of_the_same_name_is_not_followed(api: FakeApi,
                                                                    hook: Harness) -> None:
    foreign = OwnerRef("example.com/v1", "ReplicaSet", "web-abc", "uid-rs")
    assert await hook.patch(review(pod(owner=foreign))) == []
    assert api.gets == ["/api/v1/namespaces/shop"]
    assert await hook.metric("compactor_owner_lookups_total", result="invalid") == 0


@pytest.mark.asyncio
async def test_pod_create_with_garbage_object_fails_open(hook: Harness) -> None:
    body = review({"metadata": "not-a-map", "spec": []})
    assert await hook.patch(body) == []
    assert await hook.metric("compactor_admission_failed_open_total",
                             reason="malformed_object") == 1


@pytest.mark.asyncio
async def test_api_error_fails_open_and_is_counted(api: FakeApi, hook: Harness) -> None:
    api.fail = failing()
    assert await hook.patch(review(pod())) == []
    assert await hook.metric("compactor_admission_failed_open_total", reason="api_error") == 1
    assert await hook.metric("compactor_owner_lookups_total", result="error") == 1


@pytest.mark.asyncio
async def test_unexpected_exception_fails_open(api: FakeApi, hook: Harness) -> None:
    api.fail = RuntimeError("bug")
    assert await hook.patch(review(pod())) == []
    assert await hook.metric("compactor_admission_failed_open_total", reason="internal") == 1


@pytest.mark.asyncio
async def test_slow_api_fails_open_within_the_budget(api: FakeApi) -> None:
    api.delay = 5.0
    h = Harness(api, budget=0.05)
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert await h.patch(review(pod())) == []
    assert loop.time() - start < 1.0
    assert await h.metric("compactor_admission_failed_open_total", reason="timeout") == 1
    await h.client.aclose()


@pytest.mark.asyncio
async def test_the_budget_covers_the_lookups_together_not_each(api: FakeApi) -> None:
    api.delay = 0.04  # each GET within the budget, the three of them (namespace, ReplicaSet,
    h = Harness(api, budget=0.1)  # Deployment) past it
    assert await h.patch(review(pod())) == []
    assert await h.metric("compactor_admission_failed_open_total", reason="timeout") == 1
    await h.client.aclose()


@pytest.mark.asyncio
async def test_a_warm_admission_arms_no_timer(api: FakeApi, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:
    metrics = Metrics()
    admitter = Admitter(OwnerCache(api.get, metrics), metrics)
    request = orjson.loads(review(pod()))["request"]
    assert (await admitter.decide(request)).outcome is Outcome.PATCHED  # the GETs, timed
    loop = asyncio.get_running_loop()

    def no_timer(*_: Any) -> None:
        raise AssertionError("a warm admission armed a timer")

    monkeypatch.setattr(loop, "call_at", no_timer)
    monkeypatch.setattr(loop, "call_later", no_timer)
    assert (await admitter.decide(request)).outcome is Outcome.PATCHED


@pytest.mark.parametrize("text", ['{"v":9,"policy":"x"}', "garbage"])
@pytest.mark.asyncio
async def test_unusable_intent_fails_open_and_is_counted(api: FakeApi, hook: Harness,
                                                         text: str) -> None:
    api.add("shop", DEPLOY, {"compactor.dev/intent": text})
    assert await hook.patch(review(pod())) == []
    assert await hook.metric("compactor_admission_failed_open_total",
                             reason="unknown_intent") == 1
    reason = "unknown_version" if text.startswith("{") else "malformed"
    assert await hook.metric("compactor_intent_errors_total", reason=reason) == 1


@pytest.mark.asyncio
async def test_burst_of_200_pods_costs_one_get_per_owner(api: FakeApi) -> None:
    api.delay = 0.05  # every request in the burst arrives while the first GETs are in flight
    h = Harness(api)
    results = await asyncio.gather(*(h.patch(review(pod())) for _ in range(200)))
    assert all(results)
    assert sorted(api.gets) == sorted([
        "/api/v1/namespaces/shop", "/apis/apps/v1/namespaces/shop/replicasets/web-abc",
        "/apis/apps/v1/namespaces/shop/deployments/web"])
    assert await h.metric("compactor_owner_api_requests_total") == 3
    await h.client.aclose()


@pytest.mark.asyncio
async def test_recreated_owner_with_a_new_uid_is_a_miss_not_a_stale_hit(
        api: FakeApi, hook: Harness) -> None:
    await hook.patch(review(pod()))
    before = len(api.gets)
    # Same name, new uid: the cached entry for the old uid must not answer for it.
    new_rs = OwnerRef("apps/v1", "ReplicaSet", "web-abc", "uid-rs-2")
    api.add("shop", new_rs, parent=DEPLOY)
    ops = await hook.patch(review(pod(owner=new_rs)))
    assert ops and len(api.gets) == before + 1
    # A Pod still naming the old uid after the swap finds no owner on a fresh GET.
    hook.webhook.cache._cache.clear()
    assert await hook.patch(review(pod())) == []


@pytest.mark.asyncio
async def test_missing_owner_is_cached_negatively(api: FakeApi, hook: Harness) -> None:
    ghost = OwnerRef("apps/v1", "ReplicaSet", "ghost", "uid-ghost")
    assert await hook.patch(review(pod(owner=ghost))) == []
    assert await hook.patch(review(pod(owner=ghost))) == []
    assert api.gets.count("/apis/apps/v1/namespaces/shop/replicasets/ghost") == 1
    assert await hook.metric("compactor_owner_lookups_total", result="negative") == 1


@pytest.mark.asyncio
async def test_health_ready_and_metrics_endpoints(hook: Harness) -> None:
    await hook.patch(review(pod()))
    assert (await hook.client.get("/healthz")).status_code == 200
    assert (await hook.client.get("/readyz")).status_code == 200
    text = (await hook.client.get("/metrics")).text
    for name in ("compactor_admission_duration_seconds_bucket{le=\"0.0005\"}",
                 "compactor_admission_requests_total", "compactor_owner_lookups_total",
                 "compactor_owner_cache_entries 3.0", "compactor_gpu_scheduler_overrides_total"):
        assert name in text


async def _asgi(hook: Harness, messages: list[dict[str, Any]], method: str = "POST",
                headers: list[tuple[bytes, bytes]] | None = None) -> list[dict[str, Any]]:
    """One request straight through the ASGI app, its body as these receive messages."""
    sent: list[dict[str, Any]] = []
    pending: list[Message] = list(reversed(messages))

    async def receive() -> Message:
        assert pending, "the endpoint read past the request"
        return pending.pop()

    async def send(message: Message) -> None:
        sent.append(dict(message))

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": method, "scheme": "https", "path": "/mutate", "raw_path": b"/mutate",
             "root_path": "", "query_string": b"", "headers": headers or [],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8443)}
    await hook.webhook.app(scope, receive, send)
    return sent


@pytest.mark.asyncio
async def test_the_answer_is_json_of_its_declared_length(hook: Harness) -> None:
    resp = await hook.client.post("/mutate", content=review(pod()))
    assert resp.headers["content-type"] == "application/json"
    assert int(resp.headers["content-length"]) == len(resp.content)
    assert resp.json()["response"]["patchType"] == "JSONPatch"


@pytest.mark.asyncio
async def test_a_body_in_several_parts_is_read_whole(hook: Harness) -> None:
    body = review(pod())
    parts = [body[:10], b"", body[10:100], body[100:]]
    sent = await _asgi(hook, [{"type": "http.request", "body": p, "more_body": i < 3}
                              for i, p in enumerate(parts)])
    assert sent[0]["status"] == 200
    assert orjson.loads(sent[1]["body"])["response"]["uid"] == \
        orjson.loads(body)["request"]["uid"]


@pytest.mark.asyncio
async def test_a_body_declared_too_large_is_refused_unread(hook: Harness) -> None:
    sent = await _asgi(hook, [], headers=[(b"content-length", b"%d" % (3 * 1024 * 1024 + 1))])
    assert sent[0]["status"] == 413
    assert await hook.metric("compactor_admission_rejected_total", reason="too_large") == 1


@pytest.mark.asyncio
async def test_a_body_too_large_in_parts_is_refused_at_the_part_past_the_limit(
        hook: Harness) -> None:
    part = b" " * (1024 * 1024)
    sent = await _asgi(hook, [{"type": "http.request", "body": part, "more_body": True}] * 4)
    assert sent[0]["status"] == 413


@pytest.mark.asyncio
async def test_a_client_gone_before_its_body_ends_is_neither_answered_nor_counted(
        hook: Harness) -> None:
    sent = await _asgi(hook, [{"type": "http.request", "body": b"{", "more_body": True},
                              {"type": "http.disconnect"}])
    assert sent[0]["status"] == 400 and sent[0]["headers"] == [(b"content-length", b"0")]
    for outcome in ("patched", "rejected", "failed_open"):
        assert await hook.metric("compactor_admission_requests_total", outcome=outcome) == 0


@pytest.mark.asyncio
async def test_mutate_takes_only_post(hook: Harness) -> None:
    assert (await hook.client.get("/mutate")).status_code == 405
    assert (await hook.client.put("/mutate", content=review(pod()))).status_code == 405


@pytest.mark.asyncio
async def test_a_crash_in_mutate_is_a_500(hook: Harness, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    async def crash(_: Any) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(Admitter, "decide", crash)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(
        app=hook.webhook.app, raise_app_exceptions=False), base_url="http://webhook")
    resp = await client.post("/mutate", content=review(pod()))
    await client.aclose()
    assert resp.status_code == 500
