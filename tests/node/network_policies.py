"""What Compactor's NetworkPolicies select, read against the Pods that run on the real node.

The node's network plugin (the CNI reference plugins) enforces no NetworkPolicy, so the tests
prove what an enforcing plugin would be given: each policy as the API server admitted it, the
Pods its selector picks among those of the install namespace, and the ports it opens next to
the ports those Pods listen on (read from their network namespaces' socket tables).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from localcluster.node import kubelet

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


def listening_ports(cgroup_root: str, pod: Mapping[str, Any]) -> set[tuple[str, int]]:
    """The TCP ports the Pod listens on now."""
    return {("TCP", local[1]) for state, local, _ in _sockets(cgroup_root, pod)
            if state == _LISTEN}


def outgoing(cgroup_root: str, pod: Mapping[str, Any]) -> set[tuple[str, int]]:
    """The (address, port) of every peer the Pod has a connection open to, not counting those
    that came in on a port it listens on (probes, scrapes, admission calls)."""
    sockets = _sockets(cgroup_root, pod)
    served = {local[1] for state, local, _ in sockets if state == _LISTEN}
    return {remote for state, local, remote in sockets
            if state == _ESTABLISHED and local[1] not in served}
