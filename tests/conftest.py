"""Suite-wide hooks: when a test that used the local cluster fails, show the components' logs."""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

from localcluster import Cluster
from localcluster.node import netns

# The real node runs only inside the launcher's network namespace
# (`python -m localcluster.node -- pytest tests/node`); the plain run leaves it out.
collect_ignore = [] if os.environ.get(netns.OUTER_ENV) else ["node"]
# The tests beside the real Karpenter run by `make test-karpenter`, which builds it first and
# names its directory; `make test` never builds it.
if not os.environ.get("COMPACTOR_KARPENTER_DIR"):
    collect_ignore.append("karpenter")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        funcargs = getattr(item, "funcargs", {})
        cluster = next((v for v in funcargs.values() if isinstance(v, Cluster)), None)
        if cluster is not None:
            for proc in cluster.processes:
                report.sections.append((f"log of {proc.name} ({proc.log})", proc.tail(60)))
    return report
