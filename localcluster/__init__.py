"""An embedded Kubernetes control plane on loopback, for the test suite and `make demo`.

Real binaries (built by ``tools/build.sh``), real etcd, real TLS and RBAC: the point is that
what the API server judges in our tests is judged by the API server itself.
"""

from localcluster.cluster import Cluster, ClusterConfig
from localcluster.kube import ApiError, Kube

__all__ = ["ApiError", "Cluster", "ClusterConfig", "Kube"]
