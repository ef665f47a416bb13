"""`make bench-peers`, part two (not in CI): the race beside Karpenter.

Per seed, one post-drop start (``start.seeded``), restored for every arm on a fresh cluster;
the seed's arms run back to back in a random order, each over the same fixed horizon, with the
load average recorded. Records go to ``<out>/race.jsonl`` (appended: seeds may run in separate
invocations), each run's timeline to its work directory, and the tables, rebuilt from every
record, to ``<out>/race.md``. ``--tables-only`` rebuilds them and runs nothing: the records the
docs report are kept in ``docs/race/``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
from pathlib import Path

from localcluster.bench.race import report
from localcluster.bench.race.arms import ARMS, THRESHOLD, arm
from localcluster.bench.race.contract import Variant
from localcluster.bench.race.run import race
from localcluster.bench.race.start import catalogue_types, on_demand_catalogue, seeded
from localcluster.cluster.karpenter import karpenter_dir


def _catalogue() -> list[dict[str, object]]:
    """The kwok provider's instance types, from the module source its build copies."""
    file = karpenter_dir() / "src" / "karpenter" / "kwok" / "cloudprovider" / "instance_types.json"
    return on_demand_catalogue(json.loads(file.read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m localcluster.bench.race",
                                     description=__doc__)
    parser.add_argument("--nodes", type=int, default=12)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(1, 11)))
    parser.add_argument("--arms", nargs="+", choices=[a.name for a in ARMS],
                        default=[a.name for a in ARMS])
    parser.add_argument("--horizon", type=float, default=600.0,
                        help="seconds each arm runs after the start is restored")
    parser.add_argument("--catalogue", choices=("one-shape", "kwok"), default="one-shape")
    parser.add_argument("--variant", choices=[v.value for v in Variant],
                        default=Variant.NATIVE.value)
    parser.add_argument("--cycles", type=int, default=0,
                        help="day cycles, each --horizon seconds long (0: none)")
    parser.add_argument("--thresholds", type=int, default=THRESHOLD, metavar="PERCENT",
                        help="the CPU, memory and Pods thresholds of Compactor's policy and the "
                        "recipe (tune them on seeds left out of the reported ones)")
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    parser.add_argument("--tables-only", action="store_true",
                        help="rebuild <out>/race.md from <out>/race.jsonl and run nothing")
    args = parser.parse_args()
    lines = args.out / "race.jsonl"
    if args.tables_only:
        if not lines.is_file():
            parser.error(f"no records to tabulate: {lines} does not exist")
        _write_tables(args.out, lines)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    raw = _catalogue() if args.catalogue == "kwok" else None
    types = catalogue_types(raw) if raw else None
    failed = []
    for seed in args.seeds:
        start = seeded(args.nodes, seed, Variant(args.variant), types)
        starts = args.out / "starts"
        starts.mkdir(exist_ok=True)
        (starts / f"{args.nodes}-{args.catalogue}-{args.variant}-{seed}.json").write_text(
            start.to_json())
        order = list(args.arms)
        random.Random(f"{args.nodes}-{seed}").shuffle(order)
        print(f"seed {seed}: {', '.join(order)}", flush=True)
        for i, name in enumerate(order):
            workdir = Path(tempfile.mkdtemp(prefix=f"compactor-race-{name}-{seed}-"))
            try:
                record = race(arm(name), start, i, workdir, args.horizon, raw,
                              lambda s: print(s, flush=True), cycles=args.cycles,
                              threshold=args.thresholds)
            except Exception as e:
                # One run's failure must not end the others. No record: the seed's other arms
                # still run, and this arm has no pair on it.
                print(f"seed {seed}, {name}: failed, no record ({e}); its logs: {workdir}",
                      flush=True)
                failed.append(f"{seed}/{name}")
                continue
            with lines.open("a") as f:
                f.write(record.to_json() + "\n")
            # Why a consolidator moved or stood still: its own decisions, kept beside the rows.
            if (log := workdir / "logs" / "karpenter.log").exists():
                logs = args.out / "logs"
                logs.mkdir(exist_ok=True)
                shutil.copy(log, logs / f"{args.nodes}-{seed}-{name}-karpenter.log")
    if lines.is_file():
        _write_tables(args.out, lines)
    if failed:
        raise SystemExit(f"runs that failed and wrote no record: {', '.join(failed)}")


def _write_tables(out: Path, lines: Path) -> None:
    text = report.tables(report.load(lines.read_text().splitlines()))
    (out / "race.md").write_text(
        f"# The race's tables\n\nRebuilt from every record of `{lines.name}` beside this file "
        "(`python -m localcluster.bench.race --out DIR --tables-only`); what each column means is "
        "in docs/benchmarks.md.\n\n" + text + "\n")
    print("\n" + text)


if __name__ == "__main__":
    main()
