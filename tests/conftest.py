"""Suite-wide hooks: when a test that used the local cluster fails, show the components' logs."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from localcluster import Cluster


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
