"""What the real-node installs check of Compactor's hardening, whichever way it was installed:
each Pod's token (projected, an hour, the API server's audience, bound to the Pod; never the
kubelet's), the restricted Pod Security profile its namespace enforces, images by digest, and
two controller replicas run beside the Deployment's to watch the kubelet act on its probes.
"""

from __future__ import annotations

import base64
import copy
import json
import os
from pathlib import Path
from typing import Any

import httpx

from localcluster import Kube
from localcluster.cluster.kube import ApiError, path
from localcluster.node import containerd, kubelet
from localcluster.node.cluster import NodeCluster

TOKEN_SECONDS = 3600
API_ACCESS = "/var/run/secrets/kubernetes.io/serviceaccount"
RESTRICTED = "pod-security.kubernetes.io/enforce"
# Run beside the Deployment's replicas, labelled apart so that nothing counts them as its.
PROBE_LABELS = {"app.kubernetes.io/name": "compactor", "app.kubernetes.io/component": "probe-test"}
STALLED, UNSYNCED = "controller-stalled", "controller-unsynced"


def digest(node: NodeCluster, tag: str) -> str:
    """The digest (sha256:…) the node's containerd holds ``tag``'s image under, as a registry
    would serve it (``docker.io/library/`` is where a bare name lives)."""
    for name in (tag, f"docker.io/library/{tag}"):
        if name in node.by_digest:
            return node.by_digest[name].split("@", 1)[1]
    raise LookupError(f"no digest reference for {tag}: {sorted(node.by_digest)}")


def claims(token: str) -> dict[str, Any]:
    """A JWT's claims, unverified (the API server verified them when it issued it)."""
    body = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))))


def api_audiences(kube: Kube, namespace: str, account: str) -> list[str]:
    """The audience the API server gives a token asked for with none: its own."""
    asked = kube.create(path("serviceaccounts", namespace, account, sub="token"), {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
    return list(claims(asked["status"]["token"])["aud"])


def token_volume(pod: dict[str, Any]) -> dict[str, Any]:
    """The Pod's one ServiceAccount token source; fails on the kubelet's own mount or on more
    than one token."""
    spec = pod["spec"]
    assert spec.get("automountServiceAccountToken") is False, pod["metadata"]["name"]
    tokens = [s["serviceAccountToken"] for v in spec.get("volumes") or []
              for s in (v.get("projected") or {}).get("sources") or []
              if "serviceAccountToken" in s]
    assert len(tokens) == 1, (pod["metadata"]["name"], spec.get("volumes"))
    mounts = [m["mountPath"] for c in spec["containers"] for m in c.get("volumeMounts") or []]
    assert API_ACCESS in mounts, (pod["metadata"]["name"], mounts)
    return dict(tokens[0])


def in_root(root: Path, inside: str) -> Path:
    """``inside`` as the container sees it, under its ``root``: its symlinks resolved within
    that root (Debian's /var/run is a link to /run, which from the host would lead to the
    host's own /run)."""
    here, todo, hops = root, [p for p in inside.split("/") if p], 0
    while todo:
        part = todo.pop(0)
        if part == "..":
            here = here.parent if here != root else root
            continue
        step = here / part
        if step.is_symlink():
            hops += 1
            assert hops < 40, f"symlink loop at {step}"
            target = os.readlink(step)
            here = root if target.startswith("/") else here
            todo = [p for p in target.split("/") if p] + todo
        else:
            here = step
    return here


def mounted_token(node: NodeCluster, pod: dict[str, Any]) -> dict[str, Any]:
    """The claims of the token the kubelet wrote into the Pod's first container, read in its
    own root."""
    pid = kubelet.container_pid(node.cgroup_root,
                                pod["status"]["containerStatuses"][0]["containerID"])
    return claims(in_root(Path(f"/proc/{pid}/root"), f"{API_ACCESS}/token").read_text())


def check_tokens(node: NodeCluster, kube: Kube, namespace: str,
                 pods: list[dict[str, Any]]) -> dict[str, int]:
    """Every Pod's token is the projected one; each running container's is valid an hour,
    for the API server's audience, bound to its Pod and ServiceAccount. Returns the token's
    lifetime per running Pod."""
    audiences = api_audiences(kube, namespace, pods[0]["spec"]["serviceAccountName"])
    lives = {}
    for pod in pods:
        source = token_volume(pod)
        assert source == {"path": "token", "expirationSeconds": TOKEN_SECONDS}, source
        if pod["status"].get("phase") != "Running":
            continue
        got = mounted_token(node, pod)
        meta, spec = pod["metadata"], pod["spec"]
        assert got["aud"] == audiences, (meta["name"], got["aud"], audiences)
        assert got["kubernetes.io"]["pod"]["name"] == meta["name"]
        assert got["kubernetes.io"]["serviceaccount"]["name"] == spec["serviceAccountName"]
        lives[meta["name"]] = int(got["exp"]) - int(got["iat"])
    assert set(lives.values()) == {TOKEN_SECONDS}, lives
    return lives


def refused_by_the_profile(kube: Kube, namespace: str) -> str:
    """The API server's refusal of a Pod the restricted profile forbids (no security context
    at all), created as a dry run in ``namespace``."""
    try:
        kube.create(path("pods", namespace), {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "unrestricted-"},
            "spec": {"containers": [{"name": "c", "image": containerd.SANDBOX_IMAGE}]}},
            dry_run=True)
    except ApiError as e:
        assert e.status == 403, e
        return e.message
    raise AssertionError(f"a Pod breaking the restricted profile was admitted in {namespace}")


def failed_creations(kube: Kube, namespace: str) -> list[str]:
    """Events of a controller (ReplicaSet, Job) that could not create a Pod there."""
    return [f"{e['involvedObject']['kind']}/{e['involvedObject']['name']}: {e.get('message')}"
            for e in kube.items(path("events", namespace)) if e.get("reason") == "FailedCreate"]


def probe_pod(deployment: dict[str, Any], name: str, env: dict[str, str],
              service_account: str | None = None) -> dict[str, Any]:
    """A Pod of the controller Deployment's template, its probes and security as they are,
    with ``env`` added (and another ServiceAccount)."""
    spec = copy.deepcopy(deployment["spec"]["template"]["spec"])
    spec.pop("topologySpreadConstraints", None)  # they select the Deployment's Pods
    (container,) = spec["containers"]
    container["env"] = [*container["env"], *({"name": k, "value": v} for k, v in env.items())]
    if service_account:
        spec["serviceAccountName"] = service_account
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": PROBE_LABELS}, "spec": spec}


def start_probe_pods(kube: Kube, namespace: str) -> None:
    """Two controller replicas beside the Deployment's: one whose pass loop stalls at once
    (the fault setting, the shortest bound the settings take), one whose ServiceAccount may
    read nothing, so its caches never sync. Neither can lead: the first never asks, the second
    may not write the Lease."""
    deployment = kube.get(path("deployments", namespace, "compactor-controller",
                               api="apis/apps/v1"))
    kube.create(path("pods", namespace), probe_pod(deployment, STALLED, {
        "COMPACTOR_CONTROLLER_FAULT_STALL_AFTER_SECONDS": "0",
        "COMPACTOR_CONTROLLER_STALLED_AFTER_SECONDS": "10"}))
    kube.create(path("pods", namespace), probe_pod(deployment, UNSYNCED, {}, "default"))


def probe_answer(pod: dict[str, Any], which: str) -> tuple[int, str]:
    answer = httpx.get(f"http://{pod['status']['podIP']}:8080{which}", timeout=5)
    return answer.status_code, answer.text.strip()


def kubelet_events(kube: Kube, namespace: str, name: str) -> list[tuple[str, str]]:
    return [(e["reason"], e.get("message", "")) for e in kube.items(path("events", namespace))
            if e["involvedObject"].get("name") == name]


def previous_log(kube: Kube, namespace: str, name: str) -> str:
    return kube.raw(path("pods", namespace, name, sub="log") + "?previous=true").text
