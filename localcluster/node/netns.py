"""The network namespace a real node runs in: made fresh, and checked before anything starts.

A real kubelet runs containers, binds 0.0.0.0 and puts the ``kubernetes`` Service's address on
``lo``; Service-based webhooks are dialled at Pod addresses. None of that may touch the host's
network, so the harness refuses to start anywhere but in a namespace that holds only ``lo``
and the interfaces it made itself, with no route out.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# Every interface the harness makes is named with this prefix (the CNI bridge); the CNI's
# host-side veths get random names, so they count as ours when enslaved to our bridge.
PREFIX = "cpt"
BRIDGE = f"{PREFIX}0"
# Outside the service range (10.0.0.0/24) and kwok's fake Pod range (10.0.64.0/18).
POD_SUBNET = ipaddress.ip_network("10.0.192.0/24")
NODE_IP = str(next(POD_SUBNET.hosts()))
# Routes that lead nowhere but this namespace (loopback, link-local, multicast).
_INTERNAL = [ipaddress.ip_network(n) for n in ("127.0.0.0/8", "::1/128", "fe80::/64", "ff00::/8")]
_LOCAL_TYPES = {"local", "broadcast", "anycast", "multicast"}
# The launcher records the namespace it was started in, for when PID 1's cannot be read.
OUTER_ENV = "COMPACTOR_NODE_OUTER_NETNS"
# A file the launcher names, where each cluster inside lists the cgroup tree it makes, so the
# launcher can end and remove what a killed harness left there.
CGROUPS_ENV = "COMPACTOR_NODE_CGROUPS"


class NotIsolated(RuntimeError):
    """The current network namespace is not one the real node may run in."""


@dataclass(frozen=True)
class Link:
    name: str
    kind: str  # "loopback", "bridge", "veth", ... (link_type or the driver)
    master: str | None


def _ip_json(*args: str) -> list[dict[str, object]]:
    out = subprocess.run(["ip", "-j", *args], check=True, capture_output=True, text=True).stdout
    return list(json.loads(out or "[]"))


def _ns_inode(pid: str) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def current() -> int:
    """This process's network namespace (its inode)."""
    return _ns_inode("self")


def _outer() -> dict[int, str]:
    known = {}
    try:
        known[_ns_inode("1")] = "the host's network namespace (PID 1's)"
    except OSError:
        pass  # PID 1 may be out of reach (a sandbox); the checks below still apply
    if os.environ.get(OUTER_ENV, "").isdigit():
        known[int(os.environ[OUTER_ENV])] = "the namespace the launcher was started in"
    return known


def links() -> list[Link]:
    found = []
    for row in _ip_json("-d", "link", "show"):
        info = row.get("linkinfo")
        kind = info.get("info_kind") if isinstance(info, dict) else None
        master = row.get("master")
        found.append(Link(str(row["ifname"]), str(kind or row.get("link_type", "")),
                          str(master) if master else None))
    return found


def problems() -> list[str]:
    """Why this namespace is not isolated (empty when it is)."""
    outer = _outer().get(current())
    if outer:
        return [f"this is {outer}"]
    found = []
    for link in links():
        ours = link.name == "lo" or link.name.startswith(PREFIX) or (
            link.kind == "veth" and link.master is not None and link.master.startswith(PREFIX))
        if not ours:
            found.append(f"interface {link.name} ({link.kind}) is not the harness's")
    for family in ("-4", "-6"):
        for route in _ip_json(family, "route", "show", "table", "all"):
            if route.get("type") in _LOCAL_TYPES:
                continue
            dst = str(route.get("dst", ""))
            where = f"{dst} dev {route.get('dev', '?')} (table {route.get('table', 'main')})"
            if dst == "default":
                found.append(f"default route {where}: a route out")
                continue
            net = ipaddress.ip_network(dst, strict=False)
            if not any(net.version == n.version and net.subnet_of(n)  # type: ignore[arg-type]
                       for n in [POD_SUBNET, *_INTERNAL]):
                found.append(f"route to {where} leaves the harness's subnets")
    return found


def require_isolated() -> None:
    """Refuse (``NotIsolated``) unless this process is in a namespace the harness may use."""
    found = problems()
    if found:
        raise NotIsolated(
            "refusing to start the real node outside an isolated network namespace: "
            + "; ".join(found)
            + ". Run it through `python -m localcluster.node -- <command>`.")


def setup_inside() -> None:
    """In a fresh namespace: bring ``lo`` up (everything else is added by the harness), and
    give the private mount namespace a /run of its own, where containerd's shims put their
    sockets and FIFOs whatever its configuration says, and a CNI cache of its own."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    for where in ("/run", "/var/lib/cni"):  # the second: libcni's result cache
        Path(where).mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=755,nosuid,nodev", "compactor-node",
                        where], check=True)


def unshare_argv(command: Sequence[str]) -> list[str]:
    """``command`` in a new network namespace and a private mount namespace (mounts that
    containerd and kubelet make vanish with it; ``ip netns exec`` is avoided because it
    remounts /sys and hides the cgroup hierarchies)."""
    return ["unshare", "--net", "--mount", "--propagation", "private", "--", *command]


def others() -> list[int]:
    """The live processes in this namespace other than this one and its ancestors."""
    mine = _ns_inode("self")
    skip, pid = set(), os.getpid()
    while pid > 1:  # this process and the launcher that runs it
        skip.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in skip:
            continue
        try:
            if _ns_inode(entry.name) == mine and _alive(int(entry.name)):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def sweep(grace: float = 5.0) -> list[int]:
    """End what is still running in this namespace, by PID: only the harness starts anything
    here, so these are its own leftovers (say, a shim of a containerd that was killed)."""
    left = others()
    for pid in left:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(p) for p in left):
        time.sleep(0.1)
    for pid in left:
        if _alive(pid):
            _signal(pid, signal.SIGKILL)
    return left


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
