"""REST paths from the one table of kinds: whatever a name holds, it stays one path segment.
The controller's paths come from here too, so a name can never turn a patch or an eviction
into a request for another object, a collection or a query."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction import kinds


@pytest.mark.parametrize(("name", "segment"), [
    pytest.param("web-1", "web-1", id="dns-name-as-is"),
    pytest.param("web?watch=true", "web%3Fwatch%3Dtrue", id="query"),
    pytest.param("x#frag", "x%23frag", id="fragment"),
    pytest.param("%2e%2e", "%252e%252e", id="escaped-dots-stay-escaped"),
    pytest.param("a/../b", "a%2F..%2Fb", id="slash"),
    pytest.param("a b", "a%20b", id="space"),
    pytest.param("...", "...", id="three-dots-is-a-name"),
])
def test_a_name_is_one_quoted_segment(name: str, segment: str) -> None:
    path = kinds.kind("ReplicaSet").path("shop", name)
    assert path == f"/apis/apps/v1/namespaces/shop/replicasets/{segment}"


@pytest.mark.parametrize("name", ["", ".", ".."])
def test_names_that_would_climb_or_vanish_are_refused(name: str) -> None:
    with pytest.raises(ValueError):
        kinds.kind("Pod").path("shop", name)
    with pytest.raises(ValueError):
        kinds.kind("Pod").path(name, "web")


@pytest.mark.parametrize(("kind", "subresource", "expected"), [
    ("Pod", "eviction", "/api/v1/namespaces/shop/pods/web/eviction"),
    ("Deployment", None, "/apis/apps/v1/namespaces/shop/deployments/web"),
    ("Node", None, "/api/v1/nodes/web"),
    ("ClusterCompactionPolicy", "status",
     "/apis/compactor.dev/v1alpha1/clustercompactionpolicies/web/status"),
])
def test_the_controllers_paths(kind: str, subresource: str | None, expected: str) -> None:
    assert kinds.kind(kind).path("shop", "web", subresource) == expected


@given(namespace=st.text(min_size=1, max_size=30), name=st.text(min_size=1, max_size=60))
def test_any_name_stays_in_its_segment(namespace: str, name: str) -> None:
    if namespace in (".", "..") or name in (".", ".."):
        return
    path = kinds.kind("Pod").path(namespace, name, "eviction")
    parts = urlsplit(path)
    assert parts.query == "" and parts.fragment == "" and parts.path == path
    segments = path.split("/")
    assert segments[:4] == ["", "api", "v1", "namespaces"]
    assert len(segments) == 8 and segments[5] == "pods" and segments[7] == "eviction"
    assert unquote(segments[4]) == namespace and unquote(segments[6]) == name
    assert all(s not in (".", "..") for s in segments)
