"""kube-router as the real node's NetworkPolicy enforcer, started for as long as a test asks.

The CNI reference plugins enforce no NetworkPolicy. kube-router's firewall alone (no routing,
no service proxy) does, with iptables (whichever backend the ``iptables`` command has) and
ipsets, in the node's network namespace: each local Pod gets a chain that the traffic from and
to its address passes, the bridge's traffic included (``bridge-nf-call-iptables``). By design
it lets the node reach every local Pod (the kubelet's probes) and every Pod reach the service
range: what it can refuse is Pod to Pod, and Pod to the node's other addresses.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from localcluster.cluster.control_plane import SERVICE_CIDR, built
from localcluster.cluster.process import Process, StartupError

BIN_ENV = "COMPACTOR_KUBE_ROUTER_BIN"
BRIDGE_NF = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
# The chains and ipsets kube-router's firewall makes (its netpol controller's prefixes).
_OURS = re.compile(r"KUBE-(ROUTER-|POD-FW-|NWPLCY-|SRC-|DST-)")


def bin_dir() -> Path:
    """kube-router's directory, built first if its pin changed (tools/build-kube-router.sh)."""
    override = os.environ.get(BIN_ENV)
    return Path(override) if override else built("build-kube-router.sh")


def argv(bin_path: Path, kubeconfig: Path, node_name: str) -> list[str]:
    return [str(bin_path / "kube-router"), f"--kubeconfig={kubeconfig}",
            f"--hostname-override={node_name}",
            "--run-firewall=true", "--run-router=false", "--run-service-proxy=false",
            "--run-loadbalancer=false", "--enable-cni=false",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--health-port=0", "--metrics-port=0", "--iptables-sync-period=1m", "--v=1"]


def guarded(table: str, ips: Iterable[str]) -> set[str]:
    """Which of ``ips`` an ``iptables-save`` filter table sends, on their way in, to a Pod
    chain of kube-router's (it has seen the Pod and synced)."""
    return {ip for ip in ips if re.search(
        rf"^-A KUBE-ROUTER-FORWARD -d {re.escape(ip)}(/32)? .*-j KUBE-POD-FW-", table, re.M)}


def without_ours(table: str) -> str:
    """An ``iptables-save`` table with kube-router's chains, and every rule that names one,
    taken out."""
    return "".join(f"{line}\n" for line in table.splitlines() if not _OURS.search(line))


def _filter_table() -> str:
    return subprocess.run(["iptables-save", "-t", "filter"], check=True, capture_output=True,
                          text=True).stdout


def _our_ipsets() -> list[str]:
    listed = subprocess.run(["ipset", "list", "-n"], check=True, capture_output=True, text=True)
    return [name for name in listed.stdout.split() if _OURS.match(name)]


def leftovers() -> list[str]:
    """kube-router's rules, chains and ipsets still in this namespace."""
    rules = [line for line in _filter_table().splitlines() if _OURS.search(line)]
    return rules + [f"ipset {name}" for name in _our_ipsets()]


def remove_rules() -> None:
    """Take out what kube-router programmed (it leaves it when stopped): the filter table
    restored without its chains and jumps, then its ipsets destroyed. The namespace is the
    harness's own, so nothing else's rules are in the way."""
    subprocess.run(["iptables-restore"], input=without_ours(_filter_table()), check=True,
                   capture_output=True, text=True)
    for name in _our_ipsets():
        subprocess.run(["ipset", "destroy", name], check=True, capture_output=True)


@contextmanager
def enforcing(node_name: str, kubeconfig: Path, log: Path, pod_ips: Iterable[str],
              timeout: float = 60.0) -> Iterator[Process]:
    """kube-router running as the node's firewall until the block ends, once it guards every
    Pod address in ``pod_ips``; then stopped (by its PID) and its rules removed."""
    BRIDGE_NF.write_text("1")  # this namespace's own setting: bridged packets pass iptables
    proc = Process("kube-router", argv(bin_dir(), kubeconfig, node_name), log)
    proc.start()
    try:
        wanted = set(pod_ips)
        deadline = time.monotonic() + timeout
        while (missing := wanted - guarded(_filter_table(), wanted)) \
                and time.monotonic() < deadline:
            if not proc.running():
                raise StartupError(f"kube-router exited during start-up:\n{proc.tail()}")
            time.sleep(0.5)
        if missing:
            raise StartupError(f"kube-router guards no chain for {sorted(missing)} after "
                               f"{timeout:.0f}s:\n{proc.tail()}")
        yield proc
    finally:
        proc.stop()
        remove_rules()
