"""`make demo`: the embedded local cluster, up until Ctrl-C.

For now it starts the control plane with a few kwok nodes and prints how to reach it; the
compaction scenario of the end-to-end issue will run on top of this.
"""

from __future__ import annotations

import signal
import tempfile
import threading
from pathlib import Path

from localcluster import Cluster, ClusterConfig


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="compactor-demo-"))
    cluster = Cluster(ClusterConfig(workdir=workdir))
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"starting the local cluster in {workdir} ...", flush=True)
    with cluster:
        cluster.start_controller_manager()
        cluster.start_scheduler()
        cluster.start_kwok()
        kube = cluster.client()
        nodes = [f"kwok-node-{i}" for i in range(4)]
        cluster.add_nodes(kube, nodes)
        kube.close()
        print(f"\ncluster is up: {cluster.server} with {len(nodes)} kwok nodes")
        print(f"  export KUBECONFIG={cluster.kubeconfig}")
        print(f"  logs: {workdir / 'logs'}")
        print("press Ctrl-C to stop", flush=True)
        stop.wait()
    print("stopped")


if __name__ == "__main__":
    main()
