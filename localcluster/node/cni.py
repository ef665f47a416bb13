"""The Pod network: one bridge in the node's namespace, addresses from host-local IPAM.

The bridge holds the node's address and is every Pod's gateway, so a Pod's default route
leads into the node's namespace (where the API server listens) and nowhere further.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from localcluster.node import netns

NETWORK = "compactor-node"


def conflist(ipam_dir: Path) -> str:
    return json.dumps({
        "cniVersion": "1.0.0", "name": NETWORK,
        "plugins": [{
            "type": "bridge", "bridge": netns.BRIDGE, "isGateway": True, "ipMasq": False,
            "hairpinMode": True,
            "ipam": {
                "type": "host-local", "dataDir": str(ipam_dir),
                "ranges": [[{"subnet": str(netns.POD_SUBNET), "gateway": netns.NODE_IP}]],
                "routes": [{"dst": "0.0.0.0/0"}],
            },
        }],
    }, indent=2)


def write(conf_dir: Path, ipam_dir: Path) -> None:
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / f"10-{NETWORK}.conflist").write_text(conflist(ipam_dir))


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def add_bridge(service_ip: str) -> None:
    """The bridge with the node's address (the kubelet's node IP, before any Pod exists), and
    the ``kubernetes`` Service's address on ``lo`` (Pods reach the API server there)."""
    _ip("link", "add", netns.BRIDGE, "type", "bridge")
    _ip("addr", "add", f"{netns.NODE_IP}/{netns.POD_SUBNET.prefixlen}", "dev", netns.BRIDGE)
    _ip("link", "set", netns.BRIDGE, "up")
    _ip("addr", "add", f"{service_ip}/32", "dev", "lo")


def remove_bridge(service_ip: str) -> None:
    subprocess.run(["ip", "link", "del", netns.BRIDGE], check=False, capture_output=True)
    subprocess.run(["ip", "addr", "del", f"{service_ip}/32", "dev", "lo"], check=False,
                   capture_output=True)
