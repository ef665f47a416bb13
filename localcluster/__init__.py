"""An embedded Kubernetes control plane on loopback, for the test suite and `make demo`.

Real binaries (built by ``tools/build.sh``), real etcd, real TLS and RBAC: the point is that
what the API server judges in our tests is judged by the API server itself.

The names below load on first use, so that a process measuring its own memory with a light
module of this package (``loadtest.cache_rss`` with ``procstat``) does not carry the
cluster's imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from localcluster.cluster import Cluster, ClusterConfig
    from localcluster.kube import ApiError, Kube

__all__ = ["ApiError", "Cluster", "ClusterConfig", "Kube"]

_HOMES = {"ApiError": "localcluster.kube", "Cluster": "localcluster.cluster",
          "ClusterConfig": "localcluster.cluster", "Kube": "localcluster.kube"}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value
