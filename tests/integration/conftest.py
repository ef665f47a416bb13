"""Fixtures for tests against the real control plane.

One cluster per test session (etcd + kube-apiserver); the controller manager, the default
scheduler and kwok start the first time a test asks for them and then stay up.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from localcluster import Cluster, ClusterConfig, Kube
from localcluster.kube import path, wait_for


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/" in str(item.path):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(ClusterConfig(workdir=tmp_path_factory.mktemp("cluster")))
    with c:
        yield c


@pytest.fixture(autouse=True)
def _cluster_for_logs(request: pytest.FixtureRequest) -> Cluster | None:
    """Makes the cluster visible to the failure hook even when a test used only ``kube``."""
    if "cluster" in request.fixturenames or "kube" in request.fixturenames:
        return request.getfixturevalue("cluster")  # type: ignore[no-any-return]
    return None


@pytest.fixture(scope="session")
def kube(cluster: Cluster) -> Iterator[Kube]:
    client = cluster.client()
    yield client
    client.close()


@pytest.fixture(scope="session")
def controller_manager(cluster: Cluster) -> Cluster:
    if not any(p.name == "kube-controller-manager" for p in cluster.processes):
        cluster.start_controller_manager()
    return cluster


@pytest.fixture(scope="session")
def scheduler(cluster: Cluster) -> Cluster:
    if not any(p.name == "kube-scheduler" for p in cluster.processes):
        cluster.start_scheduler()
    return cluster


@pytest.fixture(scope="session")
def kwok(cluster: Cluster) -> Cluster:
    if not any(p.name == "kwok" for p in cluster.processes):
        cluster.start_kwok()
    return cluster


@pytest.fixture(scope="session")
def nodes(kwok: Cluster, kube: Kube) -> list[str]:
    """Three Ready fake nodes of 4 CPU / 16 GiB / 110 Pods."""
    names = [f"kwok-node-{i}" for i in range(3)]
    kwok.add_nodes(kube, names)
    return names


@pytest.fixture(scope="session")
def workloads(controller_manager: Cluster, scheduler: Cluster, nodes: list[str]) -> Cluster:
    """Everything a Deployment needs to end in Running Pods."""
    return controller_manager


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    """A fresh namespace with its default ServiceAccount, deleted after the test."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    kube.ensure_namespace(name, default_service_account=True)
    wait_for("default ServiceAccount", lambda: kube.get(path("serviceaccounts", name, "default")))
    yield name
    kube.delete(path("namespaces", name=name))
