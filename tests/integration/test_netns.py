"""The real node refuses every network namespace but an isolated one of its own.

Each case builds a namespace with ``unshare --net`` and asks the guard from inside it; the
host's namespace is asked directly (this test runs there).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from localcluster.node import netns

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")

GUARD = "from localcluster.node import netns; netns.require_isolated(); print('isolated')"


def guard_in_fresh_namespace(setup: str) -> subprocess.CompletedProcess[str]:
    """Run ``setup`` (shell) in a new network namespace, then the guard there."""
    script = f"set -e; ip link set lo up; {setup}\nexec {sys.executable} -c \"{GUARD}\""
    env = {k: v for k, v in os.environ.items() if k != netns.OUTER_ENV}
    return subprocess.run(["unshare", "--net", "--", "sh", "-c", script], check=False,
                          capture_output=True, text=True, env=env, timeout=60)


def test_the_host_namespace_is_refused() -> None:
    with pytest.raises(netns.NotIsolated, match="refusing to start the real node") as err:
        netns.require_isolated()
    assert "python -m localcluster.node" in str(err.value)


def test_the_namespace_the_launcher_came_from_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(netns.OUTER_ENV, str(netns.current()))
    assert "this is the namespace the launcher was started in" in netns.problems()


def test_a_fresh_namespace_with_only_the_harness_interfaces_is_accepted() -> None:
    done = guard_in_fresh_namespace(
        f"ip link add {netns.BRIDGE} type bridge; ip addr add {netns.NODE_IP}/24 dev"
        f" {netns.BRIDGE}; ip link set {netns.BRIDGE} up; ip addr add 10.0.0.1/32 dev lo;"
        # A Pod's veth: the CNI names its host end at random and enslaves it to the bridge
        # (the other end lives in the Pod's namespace; here it is enslaved as well).
        f" ip link add veth0a1b2c3d type veth peer name veth1a2b3c4d;"
        f" ip link set veth0a1b2c3d master {netns.BRIDGE};"
        f" ip link set veth1a2b3c4d master {netns.BRIDGE}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "isolated"


def test_a_foreign_interface_is_refused() -> None:
    done = guard_in_fresh_namespace("ip link add uplink0 type veth peer name uplink1")
    assert done.returncode != 0
    assert "interface uplink0 (veth) is not the harness's" in done.stderr
    assert "NotIsolated" in done.stderr


def test_a_default_route_is_refused() -> None:
    done = guard_in_fresh_namespace(
        f"ip link add {netns.BRIDGE} type bridge; ip addr add {netns.NODE_IP}/24 dev"
        f" {netns.BRIDGE}; ip link set {netns.BRIDGE} up;"
        f" ip route add default dev {netns.BRIDGE}")
    assert done.returncode != 0
    assert "default route default dev cpt0 (table main): a route out" in done.stderr


def test_a_route_beyond_the_harness_subnets_is_refused() -> None:
    done = guard_in_fresh_namespace(
        f"ip link add {netns.BRIDGE} type bridge; ip link set {netns.BRIDGE} up;"
        f" ip route add 192.168.77.0/24 dev {netns.BRIDGE} table 100")
    assert done.returncode != 0
    assert "route to 192.168.77.0/24 dev cpt0 (table 100) leaves the harness's subnets" \
        in done.stderr
