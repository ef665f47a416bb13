"""Properties of every admission answer, over generated AdmissionReviews (hypothesis).

The webhook app runs in-process with the API server's GET replaced by FakeApi (the boundary
under test is the app: parsing, owner resolution, patch building). For any review:
- the answer is never a 5xx;
- a patch, when there is one, applies to the request's object (RFC 6902, with jsonpatch);
- the patched object, sent again, gets no patch;
- the answer is the same with and without ``dryRun``;
- every request it sends the API server is a plain object path, whatever the owner
  references said.
Among the generated shapes: objects nested a hundred levels deep, label maps of thousands
of entries, and (in a test of its own) bodies with invalid UTF-8, which are refused with 400.
The app is called as uvicorn calls it, one ASGI message each way, so that 10,000 reviews fit
in the suite's time.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import os
import re
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

import jsonpatch
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from compaction.intent import Intent
from tests.unit.webhook_fakes import DEPLOY, RS, FakeApi, deployment_chain
from webhook.review import OwnerRef
from webhook.server import Webhook
from webhook.settings import Settings

CRON = OwnerRef("batch/v1", "CronJob", "nightly", "uid-cron")
JOB = OwnerRef("batch/v1", "Job", "nightly-1", "uid-job")
KAI = Intent("gpu", {"compactor.dev/policy": "gpu", "a/b~c": "x"}, "compactor-scheduler")
# Group, version, namespace, plural and name: RFC 1123 segments only, no query, no fragment.
LOOKUP = re.compile(r"/(api/v1|apis/[a-z0-9.-]+/[a-z0-9]+)(/namespaces/[a-z0-9-]+)?"
                    r"/[a-z]+(/[a-z0-9][a-z0-9.-]*)?")
# Generated reviews per run; raise it for a longer fuzz run.
EXAMPLES = int(os.environ.get("COMPACTOR_FUZZ_EXAMPLES", "10000"))
# The bodies with invalid UTF-8, on top.
UTF8_EXAMPLES = max(200, EXAMPLES // 20)


def _api() -> FakeApi:
    api = FakeApi()
    deployment_chain(api)
    api.add("shop", CRON, {"compactor.dev/intent": KAI.render()})
    api.add("shop", JOB, parent=CRON)
    return api


@dataclass(frozen=True)
class Answer:
    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode(errors="replace")

    def json(self) -> Any:
        return orjson.loads(self.content)


class App:
    """One webhook and one event loop for every example (the cache carries over, as live)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.webhook = Webhook(Settings(watch_owners=False), reader=_api())

    def post(self, body: bytes) -> Answer:
        return self.loop.run_until_complete(self._post(body))

    async def _post(self, body: bytes) -> Answer:
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": "POST", "scheme": "https", "path": "/mutate",
                 "raw_path": b"/mutate", "query_string": b"", "root_path": "",
                 "headers": [(b"content-type", b"application/json"),
                             (b"content-length", str(len(body)).encode())],
                 "client": ("127.0.0.1", 1), "server": ("webhook", 8443)}
        messages = [{"type": "http.request", "body": body, "more_body": False}]
        status, chunks = 0, []

        async def receive() -> dict[str, Any]:
            return messages.pop() if messages else {"type": "http.disconnect"}

        async def send(message: MutableMapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
        await self.webhook.app(scope, receive, send)
        return Answer(status, b"".join(chunks))

    def close(self) -> None:
        self.loop.close()


@pytest.fixture(scope="module")
def app() -> Iterator[App]:
    a = App()
    yield a
    a.close()


text = st.text(st.characters(codec="utf-8"), max_size=12)
keys = st.one_of(text, st.sampled_from([
    "compactor.dev/policy", "compactor.dev/intent", "compactor.dev/ignore", "a/b~c", "~",
    "/", "kubernetes.io/config.mirror", "app"]))
values = st.one_of(text, st.sampled_from(["true", "web-policy", ""]),
                   st.integers(-2**63, 2**63 - 1), st.none(), st.booleans())
string_maps = st.dictionaries(keys, values, max_size=4)


@st.composite
def nested(draw: st.DrawFn) -> Any:
    """A value nested 20 to 120 levels deep, maps and lists in an order the draw picks (as
    bits of one integer: a draw per level would cost the suite more than the rest)."""
    value: Any = draw(st.one_of(text, st.integers(-2**63, 2**63 - 1), st.none()))
    key, shape = draw(keys), draw(st.integers(0, 2**120 - 1))
    for level in range(draw(st.integers(20, 120))):
        value = {key: value} if shape >> level & 1 else [value]
    return value


@st.composite
def huge_maps(draw: st.DrawFn) -> dict[str, Any]:
    """Thousands of labels: a generated prefix and value repeated, plus a few drawn entries
    (drawing every entry would cost the suite minutes for no new shape)."""
    prefix, value = draw(text), draw(st.one_of(text, st.just("v" * 63)))
    out: dict[str, Any] = {f"{prefix}{i}": value for i in range(draw(st.integers(500, 5000)))}
    out.update(draw(string_maps))
    return out


maps = st.one_of(st.none(), string_maps, st.lists(text, max_size=2), text, st.integers(0, 9),
                 huge_maps(), st.dictionaries(keys, nested(), min_size=1, max_size=2))


def _ref(ref: OwnerRef) -> dict[str, Any]:
    return {"apiVersion": ref.api_version, "kind": ref.kind, "name": ref.name, "uid": ref.uid,
            "controller": True}


known_refs = st.sampled_from([_ref(RS), _ref(DEPLOY), _ref(JOB), _ref(CRON)])
odd_refs = st.fixed_dictionaries({
    "apiVersion": st.one_of(st.sampled_from(["apps/v1", "batch/v1", "v1", "apps/../v1",
                                             "evil.io/v1", "/", ""]), text),
    "kind": st.one_of(st.sampled_from(["ReplicaSet", "Job", "Deployment", "Node"]), text),
    "name": st.one_of(st.sampled_from(["web-abc", "web?watch=true", "x#frag", "%2e%2e",
                                       "..", "a/b", "UPPER", "x" * 300]), text),
    "uid": st.one_of(st.sampled_from(["uid-rs", ""]), text),
    "controller": st.one_of(st.just(True), st.booleans(), st.none()),
})
# Mostly a reference to a real owner, so that most Pods get as far as a patch.
owner_refs = st.one_of(
    st.lists(known_refs, min_size=1, max_size=1), st.lists(known_refs, min_size=1, max_size=1),
    st.lists(known_refs, min_size=1, max_size=1), st.none(), text,
    st.lists(st.one_of(known_refs, odd_refs), max_size=2))


@st.composite
def metadata(draw: st.DrawFn) -> Any:
    shape = draw(st.sampled_from(["map"] * 8 + ["absent", "null", "list"]))
    if shape != "map":
        return {"absent": ..., "null": None, "list": []}[shape]
    meta: dict[str, Any] = {"generateName": "web-abc-", "ownerReferences": draw(owner_refs)}
    for key, strategy in (("labels", maps), ("annotations", maps), ("namespace", text)):
        if draw(st.booleans()):
            meta[key] = draw(strategy)
    if draw(st.integers(0, 9)) == 0:
        meta["managedFields"] = [draw(nested())]
    return meta


@st.composite
def spec(draw: st.DrawFn) -> Any:
    shape = draw(st.sampled_from(["map", "map", "map", "map", "absent", "null", "list", "text"]))
    if shape != "map":
        return {"absent": ..., "null": None, "list": [], "text": "spec"}[shape]
    out: dict[str, Any] = {"containers": [{"name": "c", "image": "pause"}]}
    if draw(st.booleans()):
        out["schedulerName"] = draw(st.one_of(st.sampled_from(
            ["default-scheduler", "kai-scheduler", "compactor-scheduler", ""]), st.none(),
            st.integers(0, 9)))
    if draw(st.booleans()):
        out["priority"] = draw(st.one_of(st.integers(-20, 5), st.booleans(), text))
    if draw(st.integers(0, 9)) == 0:
        out["affinity"] = draw(nested())
    return out


@st.composite
def reviews(draw: st.DrawFn) -> dict[str, Any]:
    request: dict[str, Any] = {
        "uid": "review-1",
        "kind": {"group": draw(st.sampled_from(["", "", "", "apps"])), "version": "v1",
                 "kind": draw(st.sampled_from(["Pod", "Pod", "Pod", "Deployment"]))},
        "operation": draw(st.sampled_from(["CREATE", "CREATE", "CREATE", "UPDATE"])),
        "namespace": draw(st.one_of(st.sampled_from(["shop", "shop", "kube-system"]), text)),
    }
    obj_shape = draw(st.sampled_from(["pod"] * 8 + ["absent", "null", "list"]))
    if obj_shape == "pod":
        pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod"}
        for key, value in (("metadata", draw(metadata())), ("spec", draw(spec()))):
            if value is not ...:
                pod[key] = value
        request["object"] = pod
    elif obj_shape != "absent":
        request["object"] = None if obj_shape == "null" else []
    return request


def _body(request: dict[str, Any], dry_run: bool) -> bytes:
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                         "request": {**request, "dryRun": dry_run}})


def _answer(app: App, request: dict[str, Any], dry_run: bool) -> dict[str, Any]:
    resp = app.post(_body(request, dry_run))
    assert resp.status_code < 500, resp.text
    assert resp.status_code == 200, resp.text  # every generated body is an AdmissionReview
    answer: dict[str, Any] = resp.json()["response"]
    assert answer["allowed"] is True and answer["uid"] == request["uid"]
    return answer


def _ops(answer: dict[str, Any]) -> list[dict[str, Any]]:
    if "patch" not in answer:
        return []
    assert answer["patchType"] == "JSONPatch"
    ops: list[dict[str, Any]] = orjson.loads(base64.b64decode(answer["patch"]))
    assert ops, "a patch is never empty"
    return ops


def _pod_create(obj: Any) -> dict[str, Any]:
    return {"uid": "review-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE", "namespace": "shop", "object": obj}


def _of_rs(**parts: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", **parts}


OWNED = {"generateName": "web-abc-", "ownerReferences": [_ref(RS)]}


def _check(app: App, request: dict[str, Any]) -> None:
    answer = _answer(app, request, dry_run=False)
    assert _answer(app, request, dry_run=True) == answer
    api = app.webhook.reader
    assert all(LOOKUP.fullmatch(path) for path in api.gets), api.gets
    api.gets.clear()
    ops = _ops(answer)
    if not ops:
        return
    patched = jsonpatch.apply_patch(copy.deepcopy(request["object"]), ops)
    again = _answer(app, {**request, "object": patched}, dry_run=False)
    assert "patch" not in again, f"a second patch {_ops(again)} after {ops}"


# Reviews come in batches: hypothesis' own work per example, not the webhook's, is most of
# the cost, and a failing batch still shrinks to the one review that fails.
BATCH = 5


@settings(max_examples=max(1, EXAMPLES // BATCH), deadline=None, derandomize=True,
          database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(requests=st.lists(reviews(), min_size=BATCH, max_size=BATCH))
# The shapes that once produced a patch no JSONPatch library could apply:
@example(requests=[_pod_create(_of_rs(metadata=OWNED)),
                   _pod_create(_of_rs(metadata=OWNED, spec=None)),
                   _pod_create(_of_rs(metadata=OWNED, spec=[])),
                   _pod_create(_of_rs(spec={"containers": []})),
                   _pod_create(_of_rs(metadata={**OWNED, "labels": None}, spec={}))])
def test_every_answer_is_allowed_applies_and_converges(app: App,
                                                       requests: list[dict[str, Any]]) -> None:
    for request in requests:
        _check(app, request)


def test_the_generator_reaches_patches_and_refusals(app: App) -> None:
    """Guards the property above against a generator that never makes a patchable Pod."""
    metrics = app.webhook.metrics.registry
    for outcome in ("patched", "failed_open", "skipped", "unchanged"):
        assert (metrics.get_sample_value("compactor_admission_requests_total",
                                         {"outcome": outcome}) or 0) > 0, outcome
    for reason in ("malformed_object", "invalid_owner"):
        assert (metrics.get_sample_value("compactor_admission_failed_open_total",
                                         {"reason": reason}) or 0) > 0, reason


MARK = "@@not-utf-8@@"
# Stray continuation bytes, truncated and overlong sequences, a UTF-16 surrogate, 0xFF.
INVALID_UTF8 = [b"\xff", b"\xc3\x28", b"\xa0\xa1", b"\xe2\x28\xa1", b"\xf0\x28\x8c\xbc",
                b"\xc0\xaf", b"\xed\xa0\x80", b"\xf8\xa1\xa1\xa1\xa1", b"\xe2\x82"]


def _planted(request: dict[str, Any], where: str) -> dict[str, Any]:
    """The request with MARK in one string of it (the uid when the shape has no such place)."""
    out = copy.deepcopy(request)
    meta = out.get("object", {}).get("metadata") if isinstance(out.get("object"), dict) \
        else None
    if where == "namespace":
        out["namespace"] = MARK
    elif isinstance(meta, dict) and where == "label":
        meta["labels"] = {MARK: "x"}
    elif isinstance(meta, dict) and where == "annotation":
        meta["annotations"] = {"note": MARK}
    elif isinstance(meta, dict) and where == "owner":
        meta["ownerReferences"] = [{**_ref(RS), "name": MARK}]
    else:
        out["uid"] = MARK
    return out


@settings(max_examples=UTF8_EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(request=reviews(), bad=st.sampled_from(INVALID_UTF8),
       where=st.sampled_from(["namespace", "label", "annotation", "owner", "uid"]))
def test_a_body_that_is_not_utf8_is_refused_with_400(app: App, request: dict[str, Any],
                                                     bad: bytes, where: str) -> None:
    body = _body(_planted(request, where), dry_run=False)
    assert body.count(MARK.encode()) == 1
    resp = app.post(body.replace(MARK.encode(), bad))
    assert resp.status_code == 400, resp.text
    assert "not JSON" in resp.json()["error"]


@pytest.mark.parametrize("depth", [100, 1024, 1025, 5000, 200_000])
def test_nesting_deeper_than_the_parser_allows_is_refused_not_crashed(app: App,
                                                                      depth: int) -> None:
    """Valid JSON nested past the parser's 1,024 levels: HTTP 400; up to it, an answer."""
    deep = b"[" * depth + b"]" * depth
    body = (b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":'
            b'{"uid":"deep","kind":{"group":"","version":"v1","kind":"Pod"},'
            b'"operation":"CREATE","namespace":"shop","object":{"apiVersion":"v1",'
            b'"kind":"Pod","metadata":{"annotations":{"a":' + deep + b'}},"spec":{}}}}')
    resp = app.post(body)
    if depth + 6 <= 1024:
        assert resp.status_code == 200 and resp.json()["response"]["allowed"] is True
    else:
        assert resp.status_code == 400 and "not JSON" in resp.json()["error"]
