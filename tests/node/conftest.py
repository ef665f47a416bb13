"""The real node's cluster, once per session, inside the launcher's network namespace.

Run as ``python -m localcluster.node -- pytest tests/node`` (``make test`` does). Outside such
a namespace the fixture fails (the guard's refusal), it never skips; the images come from
``tools/build-images.sh``, whose directory the launcher's caller passes in
``COMPACTOR_IMAGES_DIR`` (the namespace has no network to build them in).
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from localcluster import Kube
from localcluster.node.cluster import NodeCluster, NodeConfig

IMAGES_ENV = "COMPACTOR_IMAGES_DIR"


def images() -> dict[Path, str]:
    """Each archive listed in the images directory's images.txt ("<file> <tag>" lines), with
    its tag."""
    where = os.environ.get(IMAGES_ENV)
    if not where:
        raise RuntimeError(f"{IMAGES_ENV} is not set: run `{IMAGES_ENV}=$(bash tools/"
                           "build-images.sh) python -m localcluster.node -- pytest tests/node`")
    listing = Path(where) / "images.txt"
    rows = [line.split() for line in listing.read_text().splitlines() if line.strip()]
    return {Path(where) / name: tag for name, tag in rows}


def image_archives() -> tuple[Path, ...]:
    return tuple(images())


def image(repository: str) -> str:
    """The tag of the one image of ``repository`` (e.g. ``compactor``) among the archives."""
    found = [t for t in images().values() if t.rsplit(":", 1)[0].split("/")[-1] == repository]
    if len(found) != 1:
        raise LookupError(f"no single {repository} image in {os.environ.get(IMAGES_ENV)}")
    return found[0]


@pytest.fixture(scope="session")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeCluster]:
    config = NodeConfig(workdir=tmp_path_factory.mktemp("real-node"), images=image_archives())
    with NodeCluster(config) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kube(node: NodeCluster) -> Iterator[Kube]:
    client = node.client()
    yield client
    client.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    node = getattr(item, "funcargs", {}).get("node")
    if report.failed and isinstance(node, NodeCluster):
        for proc in [*node.cluster.processes, *node.processes]:
            report.sections.append((f"log of {proc.name} ({proc.log})", proc.tail(60)))
    return report
