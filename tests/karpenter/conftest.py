"""Compactor beside the real Karpenter (its kwok provider, built by tools/build-karpenter.sh):
each module gets a cluster of its own, with Karpenter running one NodePool that does not
consolidate until a test says so. Run by `make test-karpenter`, never by `make test`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from localcluster import Cluster, ClusterConfig, Kube
from localcluster.cluster.control_plane import NodeShape
from localcluster.cluster.karpenter import Karpenter
from localcluster.cluster.stack import CompactorStack


@pytest.fixture(scope="module")
def k_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = Cluster(ClusterConfig(workdir=tmp_path_factory.mktemp("karpenter-cluster")))
    with cluster:
        cluster.start_workers()
        yield cluster


@pytest.fixture(autouse=True)
def _cluster_for_logs(request: pytest.FixtureRequest) -> Cluster | None:
    if "k_cluster" in request.fixturenames:
        return request.getfixturevalue("k_cluster")  # type: ignore[no-any-return]
    return None


@pytest.fixture(scope="module")
def k_kube(k_cluster: Cluster) -> Iterator[Kube]:
    kube = k_cluster.client()
    yield kube
    kube.close()


@pytest.fixture(scope="module")
def karpenter(k_cluster: Cluster, k_kube: Kube) -> Iterator[Karpenter]:
    with Karpenter(k_cluster, NodeShape()) as k:
        k.install(k_kube)
        k.start()
        k_cluster.processes.append(k.process)  # type: ignore[arg-type]  # its log on failure
        yield k


@pytest.fixture(scope="module")
def k_stack(k_cluster: Cluster, k_kube: Kube,
            tmp_path_factory: pytest.TempPathFactory) -> CompactorStack:
    s = CompactorStack(k_cluster, k_kube, tmp_path_factory.mktemp("stack"))
    s.install()
    s.start_webhook()
    s.start_controller()
    return s
