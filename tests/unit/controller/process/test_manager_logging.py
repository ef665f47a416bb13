"""At any log level, the controller's API client never logs response bodies (a Pod's env, a
Secret's keys): kubernetes-asyncio does at DEBUG."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from controller.process.manager import BODY_LOGGERS, quiet_client_logs


@pytest.fixture
def debug_root() -> Iterator[None]:
    root = logging.getLogger()
    saved = root.level, {n: logging.getLogger(n).level for n in BODY_LOGGERS}
    root.setLevel(logging.DEBUG)
    yield
    root.setLevel(saved[0])
    for name, level in saved[1].items():
        logging.getLogger(name).setLevel(level)


def test_response_bodies_stay_out_of_the_log_at_debug_level(
        debug_root: None, caplog: pytest.LogCaptureFixture) -> None:
    quiet_client_logs()
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("kubernetes_asyncio.client.rest").debug(
            "response body: b'{\"env\":[{\"value\":\"s3cr3t\"}]}'")
        logging.getLogger("compactor.controller").debug("a pass began")
    assert "s3cr3t" not in caplog.text
    assert "a pass began" in caplog.text  # the controller's own debug lines still show
