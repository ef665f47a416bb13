"""An embedded Kubernetes control plane on loopback, for the test suite and `make demo`.

Four packages by job: ``cluster`` (the embedded cluster itself), ``demo`` (the demo and its
scenario), ``chaos`` (faults and hostile clients) and ``bench`` (end-to-end benchmarks).

Real binaries (built by ``tools/build.sh``), real etcd, real TLS and RBAC: the point is that
what the API server judges in our tests is judged by the API server itself.

The names below load on first use, so that a process measuring its own memory with a light
module of this package (``loadtest.cache_rss`` with ``cluster.procstat``) does not carry the
cluster's imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from localcluster.cluster.control_plane import Cluster, ClusterConfig
    from localcluster.cluster.kube import ApiError, Kube

__all__ = ["ApiError", "Cluster", "ClusterConfig", "Kube"]

_PLANE, _KUBE = "localcluster.cluster.control_plane", "localcluster.cluster.kube"
_HOMES = {"ApiError": _KUBE, "Cluster": _PLANE, "ClusterConfig": _PLANE, "Kube": _KUBE}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value
