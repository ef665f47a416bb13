"""``kubectl compactor plan``: what the policies would free on a live cluster, read-only.

The command's arguments and its run: the cluster read (``cluster_read``), the files given
(``inputs``), the controller's drain plans (``report``), printed (``render``). It never writes to
the API server: every request is a list (``get`` and ``list`` are all the ``compactor-preview``
ClusterRole grants). Exit codes: 0 when the plan was made, 2 when it could not be (the cluster
unreachable, credentials refused, a permission missing, a policy invalid, a file unreadable), each
said in one line per problem.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import json
import sys
from collections.abc import Sequence
from typing import Final

import yaml

from controller.plan.decide import Lift
from kubectl_compactor.cluster_read import (
    CHUNK_SIZE,
    REQUEST_TIMEOUT,
    Progress,
    bulk_read,
    read_cluster,
)
from kubectl_compactor.counterfactual import TOP, relax
from kubectl_compactor.failure import Failure
from kubectl_compactor.inputs import (
    INSTANCE_TYPE_LABEL,
    cluster_policies,
    policy_files,
    prices,
    with_policies,
)
from kubectl_compactor.render import as_dict, plot, text
from kubectl_compactor.report import build, loads, preview_planner

FAILED: Final = 2
PROG: Final = "kubectl compactor"


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog=PROG, description=(
        "Compactor's kubectl plugin. 'plan' previews, without writing anything, which nodes "
        "the compaction policies would free on the cluster."))
    commands = top.add_subparsers(dest="command", required=True)
    p = commands.add_parser("plan", help="what the policies would free (read-only)",
                            description="Plans with the controller's own planner and prints "
                            "the nodes it would free, why the others stay, and the savings.")
    p.add_argument("-f", "--filename", action="append", default=[], metavar="FILE",
                   help="policies to judge instead of the cluster's (multi-document YAML; "
                   "repeatable; - for stdin); works where Compactor is not installed")
    p.add_argument("--kubeconfig", help="the kubeconfig (default: $KUBECONFIG or "
                   "~/.kube/config)")
    p.add_argument("--context", help="the kubeconfig context (default: its current one)")
    p.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text")
    p.add_argument("--request-timeout", type=float, default=REQUEST_TIMEOUT,
                   metavar="SECONDS", help="the longest wait for one page of a list "
                   f"(default {REQUEST_TIMEOUT:g}; 0: no limit)")
    p.add_argument("--chunk-size", type=int, default=CHUNK_SIZE, metavar="N",
                   help=f"objects per page of a list, as kubectl's flag (default {CHUNK_SIZE}; "
                   "0: each list in one answer)")
    p.add_argument("--price", metavar="FILE", help="YAML of instance type (the node label "
                   f"{INSTANCE_TYPE_LABEL}) to hourly price")
    p.add_argument("--price-per-node", type=float, metavar="HOURLY",
                   help="one hourly price for every node (for those --price does not list)")
    p.add_argument("--no-counterfactual", action="store_true",
                   help="skip what would free more (planning again with each of the first "
                   f"{TOP} levers lifted)")
    p.add_argument("--plot", metavar="FILE.png", help="also draw each node's requested CPU "
                   "and memory, before and after the plan's moves (needs matplotlib)")
    return top


def run(argv: Sequence[str] | None = None) -> tuple[int, str, list[str]]:
    """Exit code, what to print, and the error lines."""
    args = parser().parse_args(argv)
    try:
        if args.request_timeout < 0:
            raise Failure("--request-timeout: must be >= 0")
        if args.chunk_size < 0:
            raise Failure("--chunk-size: must be >= 0")
        cost = prices(args.price, args.price_per_node)
        chosen = policy_files(args.filename) if args.filename else None
        if chosen is not None and chosen.problems:
            raise Failure(*chosen.problems)
        with bulk_read():
            snapshot = asyncio.run(read_cluster(args.kubeconfig, args.context,
                                                chosen is None, Progress(sys.stderr),
                                                args.request_timeout, args.chunk_size))
        if chosen is None:
            chosen = cluster_policies(snapshot)
            if chosen.problems:
                raise Failure(*chosen.problems)
        snapshot = with_policies(snapshot, chosen)
        now = datetime.datetime.now(datetime.UTC)
        planner = preview_planner(snapshot, now)
        drains = planner(Lift())
        report = build(snapshot, drains, cost)
        if not args.no_counterfactual:
            report = dataclasses.replace(report, counterfactual=relax(
                snapshot, drains, report.stays, planner, cost, report.bounds.capacity,
                report.bounds.nodes_after - report.bounds.lower_bound))
        if args.plot:
            plot(loads(snapshot, drains), args.plot)
    except Failure as e:
        return FAILED, "", list(e.lines)
    if args.output == "json":
        return 0, json.dumps(as_dict(report), indent=2), []
    if args.output == "yaml":
        return 0, yaml.safe_dump(as_dict(report), sort_keys=False).rstrip(), []
    return 0, text(report), []


def main(argv: Sequence[str] | None = None) -> None:
    code, out, errors = run(argv)
    if out:
        print(out)
    for line in errors:
        print(f"error: {line}", file=sys.stderr)
    sys.exit(code)


if __name__ == "__main__":
    main()
