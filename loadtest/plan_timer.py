"""One checkout's drain plan timed on pickled snapshots: ``loadtest.planner`` runs this file by
path, in a child process with the checkout to time first on ``PYTHONPATH``, so that an earlier
commit's planner is timed on the very clusters this one is. Prints, as JSON, each snapshot's
timings in CPU seconds, as ``loadtest.planner`` times its own (the pass's ``plan()`` with
nothing to reuse, its drain plan timed where the pass calls it), after one untimed plan of
each."""

from __future__ import annotations

import datetime
import json
import pickle
import sys
import time
from pathlib import Path
from typing import Any

from controller.components.pod_settings import RuntimeSettings
from controller.drain_planner import memo as drain_memo
from controller.plan.decide import plan
from controller.plan.settings import PlanSettings

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)


def main() -> None:
    file, repeats = Path(sys.argv[1]), int(sys.argv[2])
    snapshots: dict[str, Any] = pickle.loads(file.read_bytes())
    settings = PlanSettings(RuntimeSettings())
    original = drain_memo.reuse_or_choose
    times: list[float] = []

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            times.append(time.process_time() - started)

    drain_memo.reuse_or_choose = timed
    out: dict[str, list[float]] = {}
    for label, snapshot in snapshots.items():
        plan(snapshot, settings, NOW)
        times.clear()
        for _ in range(repeats):
            plan(snapshot, settings, NOW)
        out[label] = list(times)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
