"""Fixtures for tests against the real control plane.

One cluster per test session (etcd + kube-apiserver); the controller manager, the default
scheduler and kwok start the first time a test asks for them and then stay up.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
import yaml

from controller.kubeapi.client import Api
from controller.process.reconciler import Reconciler
from localcluster import Cluster, ClusterConfig, Kube
from localcluster.cluster.control_plane import ROOT
from localcluster.cluster.kube import path, wait_for
from localcluster.cluster.stack import WEBHOOK_NAMESPACE_LABEL, RunningWebhook, run_webhook
from tests.integration.helpers import HARNESS_PLAN


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


@pytest.fixture(scope="module")
def webhook(cluster: Cluster, kube: Kube, workloads: Cluster,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningWebhook]:
    """The real webhook process, one per test module, registered for namespaces labelled
    ``WEBHOOK_NAMESPACE_LABEL=on``."""
    with run_webhook(cluster, kube, tmp_path_factory.mktemp("webhook")) as hook:
        yield hook


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    """A fresh namespace with its default ServiceAccount, deleted after the test."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    kube.ensure_namespace(name, default_service_account=True)
    wait_for("default ServiceAccount", lambda: kube.get(path("serviceaccounts", name, "default")))
    yield name
    kube.delete(path("namespaces", name=name))


@pytest.fixture
def hooked_ns(kube: Kube, namespace: str, webhook: RunningWebhook) -> str:
    """A fresh namespace the webhook serves."""
    kube.patch(path("namespaces", name=namespace),
               {"metadata": {"labels": {WEBHOOK_NAMESPACE_LABEL: "on"}}})
    return namespace


CRD_DIR = ROOT / "deploy" / "crds"
POLICY_API = "apis/compactor.dev/v1alpha1"


@pytest.fixture(scope="session")
def compactor_crds(kube: Kube, cluster: Cluster) -> None:
    """Every CRD of deploy/crds installed and served, and the install namespace."""
    plurals = set()
    for file in sorted(CRD_DIR.glob("*.yaml")):
        obj = yaml.safe_load(file.read_text())
        kube.apply(path("customresourcedefinitions", name=obj["metadata"]["name"]), obj)
        if obj["spec"]["group"] == "compactor.dev":
            plurals.add(obj["spec"]["names"]["plural"])

    def served() -> bool:
        return plurals <= {r["name"] for r in kube.get(f"/{POLICY_API}").get("resources", [])}
    wait_for("every compactor.dev kind served", served)
    kube.ensure_namespace("compactor-system")


class Policies:
    """ClusterCompactionPolicies a test creates, each scoped to its namespace by default;
    deleted after the test."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.created: list[str] = []

    @staticmethod
    def path(name: str | None = None) -> str:
        return path("clustercompactionpolicies", name=name, api=POLICY_API)

    def make(self, namespace: str, spec: dict[str, Any] | None = None) -> str:
        name = f"p-{uuid.uuid4().hex[:8]}"
        body = {"scope": {"namespaceSelector": {"operator": "In", "values": [namespace]}},
                **(spec or {})}
        self.kube.create(self.path(), {"apiVersion": "compactor.dev/v1alpha1",
                                       "kind": "ClusterCompactionPolicy",
                                       "metadata": {"name": name}, "spec": body})
        self.created.append(name)
        return name

    def delete(self, name: str) -> None:
        self.kube.delete(self.path(name))
        self.created.remove(name)


@pytest.fixture
def compaction_policies(kube: Kube, compactor_crds: None) -> Iterator[Policies]:
    made = Policies(kube)
    yield made
    for name in list(made.created):
        made.delete(name)


@pytest_asyncio.fixture
async def in_process_reconciler(cluster: Cluster, compactor_crds: None
                                ) -> AsyncIterator[Reconciler]:
    """The controller's pass, in this process, as cluster admin (RBAC is tested elsewhere)."""
    api = await Api.connect(str(cluster.kubeconfig))
    yield Reconciler(api, HARNESS_PLAN)
    await api.close()
