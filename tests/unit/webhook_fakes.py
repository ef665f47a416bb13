"""Helpers for webhook tests: Pod and AdmissionReview bodies (the integration tests send
them too) and an in-memory stand-in for the API server's GET (the boundary the unit tests
replace; integration tests use the real one)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import orjson

from compaction.intent import Intent
from webhook.errors import LookupFailed
from webhook.owners import namespace_path, owner_path
from webhook.review import OwnerRef

INTENT = Intent("web-policy", {"compactor.dev/policy": "web-policy"}, "compactor-scheduler")


class FakeApi:
    def __init__(self, delay: float = 0.0) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.gets: list[str] = []
        self.delay = delay
        self.fail: Exception | None = None

    async def get(self, path: str) -> dict[str, Any] | None:
        self.gets.append(path)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail is not None:
            raise self.fail
        return self.objects.get(path)

    def add(self, namespace: str, ref: OwnerRef, annotations: dict[str, str] | None = None,
            parent: OwnerRef | None = None, labels: dict[str, str] | None = None) -> None:
        meta: dict[str, Any] = {"name": ref.name, "namespace": namespace, "uid": ref.uid,
                                "annotations": annotations or {}, "labels": labels or {}}
        if parent:
            meta["ownerReferences"] = [{"apiVersion": parent.api_version, "kind": parent.kind,
                                        "name": parent.name, "uid": parent.uid,
                                        "controller": True}]
        url = owner_path(namespace, ref)
        assert url is not None, f"{ref} is not an owner kind"
        self.objects[url] = {"metadata": meta}

    def add_namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        self.objects[namespace_path(name)] = {
            "metadata": {"name": name, "labels": labels or {}}}


def failing(message: str = "HTTP 500") -> LookupFailed:
    return LookupFailed(message)


DEPLOY = OwnerRef("apps/v1", "Deployment", "web", "uid-deploy")
RS = OwnerRef("apps/v1", "ReplicaSet", "web-abc", "uid-rs")


def deployment_chain(api: FakeApi, ns: str = "shop", intent: Intent = INTENT) -> None:
    api.add_namespace(ns)
    api.add(ns, DEPLOY, {"compactor.dev/intent": intent.render()})
    api.add(ns, RS, parent=DEPLOY)


def pod(ns: str = "shop", owner: OwnerRef | None = RS, labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, scheduler: str | None = None,
        **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"generateName": "web-abc-", "namespace": ns}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    if owner:
        meta["ownerReferences"] = [{"apiVersion": owner.api_version, "kind": owner.kind,
                                    "name": owner.name, "uid": owner.uid, "controller": True}]
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "pause"}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, **extra}


def review(obj: dict[str, Any] | None, operation: str = "CREATE", kind: str = "Pod",
           group: str = "", dry_run: bool = False, namespace: str = "shop") -> bytes:
    req: dict[str, Any] = {
        "uid": str(uuid.uuid4()), "kind": {"group": group, "version": "v1", "kind": kind},
        "resource": {"group": group, "version": "v1", "resource": kind.lower() + "s"},
        "operation": operation, "namespace": namespace, "dryRun": dry_run,
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
    }
    if obj is not None:
        req["object"] = obj
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                         "request": req})
