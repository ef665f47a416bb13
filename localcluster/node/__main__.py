"""``python -m localcluster.node -- <command...>``: run a command in a fresh network namespace.

The command (say, ``pytest tests/node``) sees only ``lo``; the real-node cluster it starts adds
its bridge there. When the command ends, whatever it left running in the namespace is ended.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from localcluster.cluster.control_plane import tools_bin
from localcluster.node import kube_router, kubelet, netns
from localcluster.node.cluster import node_bin

_INSIDE = "--inside"


def main(argv: list[str]) -> int:
    inside = bool(argv) and argv[0] == _INSIDE
    if inside:
        argv = argv[1:]
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        print("usage: python -m localcluster.node -- <command...>", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("error: the real node needs root (network namespaces, cgroups, mounts)",
              file=sys.stderr)
        return 2
    if not inside:
        # The namespace has no network: build (or find) the binaries first, out here.
        env = {**os.environ, netns.OUTER_ENV: str(netns.current()),
               "COMPACTOR_TOOLS_BIN": str(tools_bin()), "COMPACTOR_NODE_BIN": str(node_bin()),
               kube_router.BIN_ENV: str(kube_router.bin_dir())}
        inner = [sys.executable, "-m", "localcluster.node", _INSIDE, "--", *argv]
        return subprocess.run(netns.unshare_argv(inner), check=False, env=env).returncode
    netns.setup_inside()
    with tempfile.NamedTemporaryFile("r", prefix="compactor-node-cgroups-") as record:
        try:
            env = {**os.environ, netns.CGROUPS_ENV: record.name}
            code = subprocess.run(argv, check=False, env=env).returncode
            return 128 - code if code < 0 else code  # killed by a signal: as a shell says
        except KeyboardInterrupt:
            return 130
        finally:
            left = netns.sweep()
            if left:
                print(f"localcluster.node: ended {len(left)} leftover process(es) in the"
                      f" namespace: {left}", file=sys.stderr)
            # A harness killed mid-run leaves its Pods' processes (in namespaces of their
            # own) and its cgroup tree: end those processes by PID, remove the tree.
            for root in set(record.read().split()):
                problems = kubelet.remove_cgroup_root(root)
                if problems:
                    print(f"localcluster.node: {'; '.join(problems)}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
