"""A real kubelet runs Pods: the node turns Ready, a Pod runs on it with an address from the
bridge, and from that Pod's network namespace the API server answers at the ``kubernetes``
Service's address, to the Pod's own service-account token, over a certificate its CA bundle
trusts (the path every in-cluster client takes, with no kube-proxy)."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from localcluster import Kube
from localcluster.cluster.kube import path
from localcluster.node import containerd, kubelet, netns
from localcluster.node.cluster import KWOK_TAINT, SERVICE_IP, NodeCluster
from tests.node.conftest import image

PAUSE_POD = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pause", "namespace": "default"},
    "spec": {"containers": [{"name": "pause", "image": containerd.SANDBOX_IMAGE,
                             "imagePullPolicy": "Never"}]},
}
# What an in-cluster client does: the Service's address from the environment, the Pod's own
# token and CA bundle (run by the test in the Pod's network namespace, or in a Pod).
IN_CLUSTER_CALL = """
import json, os, ssl, sys, urllib.request
root, host, port = sys.argv[1], sys.argv[2], sys.argv[3]
sa = root + "/var/run/secrets/kubernetes.io/serviceaccount"
tls = ssl.create_default_context(cafile=sa + "/ca.crt")
token = open(sa + "/token").read()
review = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
req = urllib.request.Request(
    f"https://{host}:{port}/apis/authentication.k8s.io/v1/selfsubjectreviews",
    data=review.encode(), method="POST",
    headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
with urllib.request.urlopen(req, context=tls, timeout=10) as resp:
    print(json.dumps({"status": resp.status, "body": json.load(resp)}))
"""


def wait_running(kube: Kube, namespace: str, name: str, timeout: float = 90.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        pod = kube.get(path("pods", namespace, name))
        if pod.get("status", {}).get("phase") == "Running":
            return pod
        assert time.monotonic() < deadline, f"{name} not Running: {pod.get('status')}"
        time.sleep(0.1)


def test_the_node_is_ready_beside_tainted_kwok_nodes(node: NodeCluster, kube: Kube) -> None:
    node.add_kwok_nodes(["kwok-1", "kwok-2"])
    real = kube.get(path("nodes", name=node.name))
    ready = {c["type"]: c["status"] for c in real["status"]["conditions"]}
    assert ready["Ready"] == "True", real["status"]["conditions"]
    assert {"type": "InternalIP", "address": netns.NODE_IP} in real["status"]["addresses"]
    assert not real["spec"].get("taints")
    assert real["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://2.")
    for name in ("kwok-1", "kwok-2"):
        assert kube.get(path("nodes", name=name))["spec"]["taints"] == [KWOK_TAINT]


def test_a_pod_runs_on_the_real_node_and_reaches_the_api_server(
        node: NodeCluster, kube: Kube) -> None:
    start = time.monotonic()
    kube.create(path("pods", "default"), PAUSE_POD)
    pod = wait_running(kube, "default", "pause")
    print(f"pause Pod Running {time.monotonic() - start:.1f} s after its creation")
    assert pod["spec"]["nodeName"] == node.name  # the kwok nodes' taint kept it off them
    assert ipaddress.ip_address(pod["status"]["podIP"]) in netns.POD_SUBNET

    pid = kubelet.container_pid(node.cgroup_root, pod["status"]["containerStatuses"][0]
                                ["containerID"])
    environ = dict(line.split("=", 1) for line in Path(f"/proc/{pid}/environ").read_bytes()
                   .decode().split("\0") if "=" in line)
    assert environ["KUBERNETES_SERVICE_HOST"] == SERVICE_IP
    port = environ["KUBERNETES_SERVICE_PORT"]
    assert port == "443"

    done = subprocess.run(
        ["nsenter", f"--target={pid}", "--net", "--", sys.executable, "-c", IN_CLUSTER_CALL,
         f"/proc/{pid}/root", SERVICE_IP, port],
        check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["status"] == 201
    assert answer["body"]["status"]["userInfo"]["username"] == \
        "system:serviceaccount:default:default"
    # The API server reaches the kubelet too (logs, exec), with the node CA's certificates.
    assert kube.raw(path("pods", "default", "pause", sub="log")).status_code == 200
    kube.delete(path("pods", "default", "pause"))


def test_a_pod_of_compactors_image_calls_the_api_server_in_cluster(kube: Kube) -> None:
    """The same call from a process in a Pod (Compactor's image has Python): the kubelet's
    environment, the mounted token, the route out of the Pod, all as the product uses them."""
    command = ["python3", "-c", IN_CLUSTER_CALL, "", "$(KUBERNETES_SERVICE_HOST)",
               "$(KUBERNETES_SERVICE_PORT)"]
    kube.create(path("pods", "default"), {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "in-cluster"},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "call", "image": image("compactor"), "imagePullPolicy": "Never",
            "command": command}]},
    })
    deadline = time.monotonic() + 90
    while (phase := kube.get(path("pods", "default", "in-cluster"))["status"].get("phase")) \
            not in ("Succeeded", "Failed"):
        assert time.monotonic() < deadline, f"in-cluster Pod still {phase}"
        time.sleep(0.2)
    log = kube.raw(path("pods", "default", "in-cluster", sub="log")).text
    assert phase == "Succeeded", log
    answer = json.loads(log.strip().splitlines()[-1])
    assert answer["status"] == 201
    assert answer["body"]["status"]["userInfo"]["username"] == \
        "system:serviceaccount:default:default"
    kube.delete(path("pods", "default", "in-cluster"))
