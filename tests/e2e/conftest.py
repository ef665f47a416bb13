"""The end-to-end compaction runs on a cluster of its own: its nodes and Pods are the whole
point, so no other test's leftovers may share it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from localcluster import Cluster, ClusterConfig, Kube
from localcluster.cluster.stack import CompactorStack


@pytest.fixture(scope="module")
def e2e_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = Cluster(ClusterConfig(workdir=tmp_path_factory.mktemp("e2e-cluster")))
    with cluster:
        cluster.start_workers()
        yield cluster


@pytest.fixture(autouse=True)
def _cluster_for_logs(request: pytest.FixtureRequest) -> Cluster | None:
    if "e2e_cluster" in request.fixturenames:
        return request.getfixturevalue("e2e_cluster")  # type: ignore[no-any-return]
    return None


@pytest.fixture(scope="module")
def e2e_kube(e2e_cluster: Cluster) -> Iterator[Kube]:
    kube = e2e_cluster.client()
    yield kube
    kube.close()


@pytest.fixture(scope="module")
def stack(e2e_cluster: Cluster, e2e_kube: Kube,
          tmp_path_factory: pytest.TempPathFactory) -> CompactorStack:
    """Compactor as the compaction runs have it: deploy/'s objects, the webhook and the
    controller as processes (the compaction scheduler starts with the run)."""
    s = CompactorStack(e2e_cluster, e2e_kube, tmp_path_factory.mktemp("stack"))
    s.install()
    s.start_webhook()
    s.start_controller()
    return s
