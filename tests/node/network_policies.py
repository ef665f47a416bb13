"""What Compactor's NetworkPolicies select, read against the Pods that run on the real node,
and the connections that show them enforced.

The node's network plugin (the CNI reference plugins) enforces no NetworkPolicy, so the tests
read what an enforcing plugin is given: each policy as the API server admitted it, the Pods its
selector picks among those of the install namespace, and the ports it opens next to the ports
those Pods listen on (read from their network namespaces' socket tables). With kube-router
enforcing them (localcluster.node.kube_router), they dial from one Pod's network namespace to
another's: what a policy allows connects, what it does not is refused.
"""

from __future__ import annotations

import ctypes
import errno
import ipaddress
import os
import socket
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcluster.node import containerd, kubelet
from localcluster.node.cluster import API_PORT, SERVICE_IP
from localcluster.node.netns import NODE_IP

# /proc/net/tcp{,6}: the states of a listening and of an established socket.
_LISTEN, _ESTABLISHED = "0A", "01"


def selects(policy: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """Whether the policy's podSelector picks the Pod (same namespace assumed); matchLabels
    only, as Compactor's policies use."""
    selector = policy["spec"]["podSelector"]
    assert set(selector) <= {"matchLabels"}, selector
    labels = pod["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def container_ports(pod: Mapping[str, Any]) -> dict[str, int]:
    """The Pod's named container ports."""
    return {p["name"]: p["containerPort"] for c in pod["spec"]["containers"]
            for p in c.get("ports") or [] if p.get("name")}


def _numbers(rules: Iterable[Mapping[str, Any]], pod: Mapping[str, Any]) -> set[tuple[str, int]]:
    named = container_ports(pod)
    out = set()
    for rule in rules:
        for p in rule.get("ports") or []:
            port = p["port"]
            out.add((p.get("protocol", "TCP"), named[port] if isinstance(port, str) else port))
    return out


def ingress_ports(policy: Mapping[str, Any], pod: Mapping[str, Any]) -> set[tuple[str, int]]:
    """The (protocol, port) pairs the policy lets into the Pod, named ports resolved
    against the Pod's containers."""
    return _numbers(policy["spec"].get("ingress") or [], pod)


def egress_ports(policy: Mapping[str, Any], pod: Mapping[str, Any]) -> set[tuple[str, int]]:
    return _numbers(policy["spec"].get("egress") or [], pod)


def _address(text: str) -> tuple[str, int]:
    """A /proc/net/tcp{,6} address: the IP in 32-bit words of host order, ':', the port."""
    ip, port = text.split(":")
    raw = b"".join(bytes.fromhex(ip[i:i + 8])[::-1] for i in range(0, len(ip), 8))
    parsed = ipaddress.ip_address(socket.inet_ntop(
        socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw))
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped:
        parsed = parsed.ipv4_mapped
    return str(parsed), int(port, 16)


def _sockets(cgroup_root: str, pod: Mapping[str, Any]) -> list[tuple[str, tuple[str, int],
                                                                      tuple[str, int]]]:
    """(state, local, remote) of every TCP socket in the Pod's network namespace (that of its
    first container's process)."""
    status = pod["status"]["containerStatuses"][0]
    pid = kubelet.container_pid(cgroup_root, status["containerID"])
    out = []
    for name in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{name}").read_text().splitlines()[1:]:
            fields = line.split()
            out.append((fields[3], _address(fields[1]), _address(fields[2])))
    return out


def _loopback(address: tuple[str, int]) -> bool:
    """Within the Pod (a container's listener for the others, as the compaction scheduler's
    extender is): no NetworkPolicy governs it, and nothing outside the Pod reaches it."""
    return ipaddress.ip_address(address[0]).is_loopback


def listening_ports(cgroup_root: str, pod: Mapping[str, Any]) -> set[tuple[str, int]]:
    """The TCP ports the Pod listens on now, beyond its loopback."""
    return {("TCP", local[1]) for state, local, _ in _sockets(cgroup_root, pod)
            if state == _LISTEN and not _loopback(local)}


def outgoing(cgroup_root: str, pod: Mapping[str, Any]) -> set[tuple[str, int]]:
    """The (address, port) of every peer beyond its loopback the Pod has a connection open
    to, not counting those that came in on a port it listens on (probes, scrapes, admission
    calls)."""
    sockets = _sockets(cgroup_root, pod)
    served = {local[1] for state, local, _ in sockets if state == _LISTEN}
    return {remote for state, local, remote in sockets
            if state == _ESTABLISHED and local[1] not in served and not _loopback(remote)}


_CLONE_NEWNET = 0x40000000


def socket_in(pid: int | None) -> socket.socket:
    """A TCP socket in the network namespace of process ``pid`` (this one's with None). A
    thread enters the namespace, makes the socket and ends: the socket stays in the namespace
    it was made in, and no other thread ever leaves this process's."""
    if pid is None:
        return socket.socket()
    made: list[socket.socket | BaseException] = []

    def enter() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            with open(f"/proc/{pid}/ns/net") as ns:
                if libc.setns(ns.fileno(), _CLONE_NEWNET) != 0:
                    code = ctypes.get_errno()
                    raise OSError(code, os.strerror(code))
            made.append(socket.socket())
        except BaseException as e:  # handed to the caller's thread
            made.append(e)
    thread = threading.Thread(target=enter)
    thread.start()
    thread.join()
    (result,) = made
    if isinstance(result, BaseException):
        raise result
    return result


def listen_in(pid: int | None, port: int) -> socket.socket:
    """A listener on every address of ``pid``'s namespace: the kernel completes connections
    to it without an accept."""
    sock = socket_in(pid)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("0.0.0.0", port))
    sock.listen(64)
    return sock


def dial(pid: int | None, ip: str, port: int, timeout: float = 3.0) -> str:
    """How a TCP connection from ``pid``'s namespace to ``ip:port`` ends: "open", "refused"
    (a reset, or the ICMP unreachable a REJECT rule sends), "timed out" (dropped), or the
    error's name."""
    with socket_in(pid) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect((ip, port))
        except ConnectionRefusedError:
            return "refused"
        except TimeoutError:
            return "timed out"
        except OSError as e:
            return errno.errorcode.get(e.errno or 0, str(e))
        return "open"


def netns_pid(cgroup_root: str, pod: Mapping[str, Any]) -> int:
    """A process in the Pod's network namespace (its first container's)."""
    return kubelet.container_pid(cgroup_root, pod["status"]["containerStatuses"][0]["containerID"])


# A port no Compactor Pod serves or opens: the tests listen on it in a Pod's namespace.
BEYOND = 19090
PROBE_LABELS = {"app.kubernetes.io/name": "netpol-probe"}


def probe_pod(name: str) -> dict[str, Any]:
    """A Pod selected by no policy, on the real node (it does not tolerate the kwok nodes'
    taint), whose namespace the tests dial from and listen in; the sandbox image, which
    the node already holds, and the restricted profile's security context."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": PROBE_LABELS},
            "spec": {"automountServiceAccountToken": False, "containers": [{
                "name": "probe", "image": containerd.SANDBOX_IMAGE, "imagePullPolicy": "Never",
                "securityContext": {
                    "runAsNonRoot": True, "runAsUser": 65535, "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                    "seccompProfile": {"type": "RuntimeDefault"}}}]}}


@dataclass(frozen=True)
class Peer:
    """A Pod as the tests dial it: its address, a process in its namespace, the ports its
    policy opens."""
    name: str
    ip: str
    pid: int
    opened: frozenset[tuple[str, int]]


def peer(cgroup_root: str, name: str, pod: Mapping[str, Any],
         policy: Mapping[str, Any] | None = None) -> Peer:
    return Peer(name, pod["status"]["podIP"], netns_pid(cgroup_root, pod),
                frozenset(ingress_ports(policy, pod) if policy else ()))


def beyond_policy(probe: Peer, targets: Iterable[Peer]) -> dict[str, str]:
    """How the paths each target's policy forbids end: into the target on ``BEYOND`` from the
    probe; out of the target to the probe's ``BEYOND`` and to the kubelet (the node's address,
    not the API server's port). The caller listens on ``BEYOND`` in every namespace."""
    out = {}
    for t in targets:
        out[f"probe -> {t.name}:{BEYOND}"] = dial(probe.pid, t.ip, BEYOND)
        out[f"{t.name} -> probe:{BEYOND}"] = dial(t.pid, probe.ip, BEYOND)
        out[f"{t.name} -> kubelet {NODE_IP}:{kubelet.PORT}"] = dial(t.pid, NODE_IP, kubelet.PORT)
    return out


def within_policy(probe: Peer, targets: Iterable[Peer]) -> dict[str, str]:
    """How the paths each target's policy allows end: into every port it opens from the
    probe; out to the API server, at the kubernetes Service's address and at the node's. And
    the node into ``BEYOND``: kube-router lets the node reach its Pods (the kubelet's probes),
    which shows the listener there is up while the probe is refused."""
    out = {}
    for t in targets:
        for _, port in sorted(t.opened):
            out[f"probe -> {t.name}:{port}"] = dial(probe.pid, t.ip, port)
        out[f"node -> {t.name}:{BEYOND}"] = dial(None, t.ip, BEYOND)
        out[f"{t.name} -> API server {SERVICE_IP}:443"] = dial(t.pid, SERVICE_IP, 443)
        out[f"{t.name} -> API server {NODE_IP}:{API_PORT}"] = dial(t.pid, NODE_IP, API_PORT)
    return out
