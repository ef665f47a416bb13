"""Reading a live cluster: the progress line, and no cyclic collection while the records are
read."""

from __future__ import annotations

import gc
import io
from collections.abc import Callable, Coroutine
from typing import Any

from controller.snapshot.snapshot import Snapshot
from kubectl_compactor import cluster_read


def reads(snapshot: Snapshot) -> Callable[..., Coroutine[Any, Any, Snapshot]]:
    async def read(kubeconfig: str | None, context: str | None, policies: bool,
                   progress: cluster_read.Progress | None = None,
                   timeout: float = cluster_read.REQUEST_TIMEOUT,
                   page: int = cluster_read.CHUNK_SIZE) -> Snapshot:
        return snapshot
    return read


class _Terminal(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_the_progress_line_is_rewritten_in_place_on_a_terminal_and_erased() -> None:
    term = _Terminal(True)
    progress = cluster_read.Progress(term)
    progress.listed("/api/v1/nodes", 500)
    progress.listed("/api/v1/pods", 500)
    shown = term.getvalue()
    assert shown.startswith("\rlisting nodes: 500 objects read")
    assert "\rlisting pods: 1,000 objects read" in shown and "\n" not in shown
    progress.done()
    assert term.getvalue().endswith("\r" + " " * len("listing pods: 1,000 objects read") + "\r")


def test_no_progress_line_off_a_terminal() -> None:
    piped = _Terminal(False)
    progress = cluster_read.Progress(piped)
    progress.listed("/api/v1/pods", 500)
    progress.done()
    assert piped.getvalue() == "" and progress.objects == 500


def test_the_cluster_is_read_without_cyclic_collections_and_then_frozen_out_of_them() -> None:
    assert gc.isenabled()
    try:
        with cluster_read.bulk_read():
            assert not gc.isenabled()
            kept = [{"pod": i} for i in range(1000)]
        assert gc.isenabled() and gc.get_freeze_count() >= len(kept)
    finally:
        gc.unfreeze()
