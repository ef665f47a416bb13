"""``kubectl compactor plan``: what the policies would free on a live cluster, read-only.

The I/O edge of ``kubectl_compactor.report``: it reads the kubeconfig, lists what a pass reads (with
the controller's own list calls and parsers, ``controller.read.reader``), reads policy and price
files, and prints. It never writes to the API server: every request is a list (``get`` and
``list`` are all the ``compactor-preview`` ClusterRole grants). Exit codes: 0 when the plan
was made, 2 when it could not be (the cluster unreachable, credentials refused, a permission
missing, a policy invalid, a file unreadable), each said in one line per problem.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import gc
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

import orjson
import yaml

from controller.kubeapi.client import (
    PAGE,
    TIMED_OUT,
    UNREACHABLE,
    Api,
    ApiError,
    Decode,
    KubeconfigError,
    Page,
)
from controller.read.reader import Reader
from controller.read.sources import (
    JOBS,
    NAMESPACES,
    NODES,
    PDBS,
    PODS,
    REPLICA_SETS,
)
from controller.snapshot.snapshot import Snapshot
from kubectl_compactor import report as preview

FAILED: Final = 2
REQUEST_TIMEOUT: Final = 60.0  # seconds per page; a page of 2,000 Pods is 8 MB of JSON
# Objects per page. kubectl asks for 500; the API server spends about as much again per
# page as per 500 Pods in it, so fewer, larger pages halve its work on a large list.
CHUNK_SIZE: Final = 2000
PROG: Final = "kubectl compactor"


class PreviewReader(Reader):
    """The reader's list calls and parsers for exactly what a drain plan needs: nodes, Pods,
    disruption budgets, namespaces, the owning workloads (and their ReplicaSets and Jobs),
    and the policies when they come from the cluster (a kind not served has none).

    The Pods, nearly all of what is read, are listed beside the rest rather than after it:
    the API server answers the small lists while the plugin parses Pod pages."""

    def __init__(self, api: Api, cluster_policies: bool, page: int = CHUNK_SIZE) -> None:
        super().__init__(api)
        self.cluster_policies = cluster_policies
        self.page = page

    async def read(self) -> Snapshot:
        pods = asyncio.ensure_future(self._cached(PODS))
        try:
            rest = await self._rest()
            return dataclasses.replace(rest, pods=tuple(await pods))
        finally:
            if not pods.done():  # the rest failed: so does the preview
                pods.cancel()
                with contextlib.suppress(asyncio.CancelledError, ApiError):
                    await pods

    async def _rest(self) -> Snapshot:
        policies = await self._policies() if self.cluster_policies else []
        evaluation = await self._evaluation()
        namespaces = dict(await self._cached(NAMESPACES))
        workloads = await self._workloads(namespaces)
        owners = await self._cached(REPLICA_SETS)
        owners += [owner for owner, _ in await self._cached(JOBS)]
        return Snapshot(
            policies=tuple(policies), evaluation=evaluation, namespaces=namespaces,
            nodes=tuple(await self._cached(NODES)), pdbs=tuple(await self._cached(PDBS)),
            workloads=tuple(workloads), owners=tuple(owners))


class Failure(Exception):
    """Why no plan was made: one line per problem."""

    def __init__(self, *lines: str) -> None:
        self.lines = lines
        super().__init__("; ".join(lines))


def _resource(path: str) -> str:
    """``/apis/apps/v1/deployments`` -> ``deployments.apps``; ``/api/v1/pods`` -> ``pods``."""
    parts = path.strip("/").split("/")
    if parts[0] == "api":
        return parts[-1]
    return f"{parts[-1]}.{parts[1]}"


def api_failure(e: ApiError, path: str, server: str) -> Failure:
    """One line naming what failed."""
    if e.status == UNREACHABLE and e.reason == TIMED_OUT:
        return Failure(f"listing {_resource(path)} at {server}: {e.message} "
                       "(--request-timeout SECONDS, 0 for no limit)")
    if e.status == UNREACHABLE:
        return Failure(f"cannot reach the API server at {server}: {e.message}")
    if e.status == 401:
        return Failure(f"the API server at {server} refused the credentials (401 "
                       "Unauthorized): they are missing, invalid or expired; log in again")
    if e.status == 403:
        return Failure(f"forbidden (403): cannot list {_resource(path)} at the cluster scope "
                       f"({e.message}); grant the ClusterRole compactor-preview")
    return Failure(f"listing {_resource(path)} failed: HTTP {e.status} {e.reason}: "
                   f"{e.message[:300]}")


class Progress:
    """A line on a terminal while the cluster is listed (a large one takes seconds), rewritten
    in place and erased at the end; nothing when ``stream`` is not a terminal, so that
    ``-o json`` piped or redirected stays clean (the progress goes to stderr anyway)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.on = stream.isatty()
        self.objects = 0
        self._shown = 0

    def listed(self, path: str, count: int) -> None:
        self.objects += count
        if self.on:
            self._show(f"listing {_resource(path)}: {self.objects:,} objects read")

    def _show(self, line: str) -> None:
        self.stream.write("\r" + line.ljust(self._shown))
        self.stream.flush()
        self._shown = len(line)

    def done(self) -> None:
        if self.on and self._shown:
            self.stream.write("\r" + " " * self._shown + "\r")
            self.stream.flush()
            self._shown = 0


class _Tracking(Api):
    """The API client, reading only, and telling ``progress`` of every page it reads."""

    progress: Progress | None = None

    async def pages(self, path: str, label_selector: str | None = None,
                    limit: int = PAGE, decode: Decode = orjson.loads) -> AsyncIterator[Page]:
        async for items, version in super().pages(path, label_selector, limit, decode):
            if self.progress is not None:
                self.progress.listed(path, len(items))
            yield items, version

    async def request(self, method: str, path: str, body: Any = None,
                      content_type: str = "application/json",
                      query: dict[str, str] | None = None,
                      decode: Decode = orjson.loads) -> dict[str, Any]:
        assert method == "GET", f"the preview only reads; it asked to {method} {path}"
        return await super().request(method, path, body, content_type, query, decode)


def kubeconfig_files(given: str | None) -> list[str]:
    """The kubeconfig files kubectl would read: ``--kubeconfig``, else ``$KUBECONFIG`` (a
    list), else ``~/.kube/config``."""
    if given:
        return [given]
    listed = [f for f in os.environ.get("KUBECONFIG", "").split(os.pathsep) if f]
    return listed or [str(Path("~/.kube/config").expanduser())]


async def _connect(kubeconfig: str | None, context: str | None, timeout: float) -> _Tracking:
    files = kubeconfig_files(kubeconfig)
    if not any(Path(f).expanduser().is_file() for f in files):
        raise Failure(f"no kubeconfig: {', '.join(files)} not found (--kubeconfig FILE)")
    try:
        api = await _Tracking.from_kubeconfig(files, context)
    except KubeconfigError as e:
        raise Failure(f"cannot load the kubeconfig: {e}") from e
    api.timeout = timeout
    return api


async def read_cluster(kubeconfig: str | None, context: str | None,
                       cluster_policies: bool, progress: Progress | None = None,
                       timeout: float = REQUEST_TIMEOUT, page: int = CHUNK_SIZE) -> Snapshot:
    api = await _connect(kubeconfig, context, timeout)
    api.progress = progress
    try:
        return await PreviewReader(api, cluster_policies, page).read()
    except ApiError as e:
        raise api_failure(e, e.path, str(api.client.configuration.host)) from e
    finally:
        if progress is not None:
            progress.done()
        await api.close()


@contextlib.contextmanager
def bulk_read() -> Iterator[None]:
    """No cyclic garbage collection while the cluster is read, and what was read frozen out
    of later collections. The records read are acyclic and live to the end, yet each full
    collection walks all of them: at 150,000 Pods that cost more CPU than decoding and
    parsing them together."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def _load_yaml(file: str, many: bool) -> Any:
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text()
        return list(yaml.safe_load_all(text)) if many else yaml.safe_load(text)
    except OSError as e:
        raise Failure(f"{file}: cannot read: {e.strerror or e}") from e
    except yaml.YAMLError as e:
        raise Failure(f"{file}: not YAML: {' '.join(str(e).split())}") from e


def policy_files(files: Sequence[str]) -> preview.Policies:
    docs = [(f"{file}#{i}", doc) for file in files
            for i, doc in enumerate(_load_yaml(file, many=True), 1)]
    chosen = preview.read_documents(docs)
    if not chosen.problems and not chosen.policies:
        raise Failure(f"{', '.join(files)}: no ClusterCompactionPolicy or CompactionPolicy")
    return chosen


def prices(file: str | None, per_node: float | None) -> preview.Prices:
    if per_node is not None and per_node < 0:
        raise Failure("--price-per-node: must be >= 0")
    by_type: dict[str, float] = {}
    if file is not None:
        by_type, problems = preview.parse_prices(_load_yaml(file, many=False), file)
        if problems:
            raise Failure(*problems)
    return preview.Prices(by_type, per_node)


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
                   f"{preview.INSTANCE_TYPE_LABEL}) to hourly price")
    p.add_argument("--price-per-node", type=float, metavar="HOURLY",
                   help="one hourly price for every node (for those --price does not list)")
    p.add_argument("--plot", metavar="FILE.png", help="also draw each node's requested CPU "
                   "and memory, before and after the plan's moves (needs matplotlib)")
    return top


def plot(node_loads: Sequence[preview.NodeLoad], file: str) -> None:
    """Requested CPU and memory per node, before and after, as the demo draws CPU."""
    try:
        import matplotlib
    except ImportError as e:
        raise Failure("--plot needs matplotlib (pip install matplotlib)") from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = range(len(node_loads))
    names = [n.node for n in node_loads]
    fig, axes = plt.subplots(2, 1, figsize=(max(10, len(node_loads) * 0.5), 7), sharex=True)
    for ax, unit, scale, values in (
            (axes[0], "requested CPU (cores)", 1000,
             [(n.cpu_before, n.cpu_after, n.cpu_allocatable) for n in node_loads]),
            (axes[1], "requested memory (GiB)", 2**30,
             [(n.memory_before, n.memory_after, n.memory_allocatable) for n in node_loads])):
        ax.bar([i - 0.2 for i in x], [b / scale for b, _, _ in values], 0.4, label="before")
        ax.bar([i + 0.2 for i in x], [a / scale for _, a, _ in values], 0.4,
               label="after the plan")
        ax.hlines([c / scale for _, _, c in values], [i - 0.45 for i in x],
                  [i + 0.45 for i in x], color="grey", linestyle="--", label="allocatable")
        ax.set_ylabel(unit)
        ax.legend(loc="upper right")
    axes[1].set_xticks(list(x), names, rotation=45, ha="right")
    axes[0].set_title("Requested CPU and memory per node, before and after the plan")
    fig.tight_layout()
    try:
        fig.savefig(file, dpi=100, format="png")
    except OSError as e:
        raise Failure(f"{file}: cannot write: {e.strerror or e}") from e
    finally:
        plt.close(fig)


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
            chosen = preview.cluster_policies(snapshot)
            if chosen.problems:
                raise Failure(*chosen.problems)
        snapshot = preview.with_policies(snapshot, chosen)
        now = datetime.datetime.now(datetime.UTC)
        drains = preview.preview_drains(snapshot, now)
        report = preview.build(snapshot, drains, cost)
        if args.plot:
            plot(preview.loads(snapshot, drains), args.plot)
    except Failure as e:
        return FAILED, "", list(e.lines)
    if args.output == "json":
        return 0, json.dumps(preview.as_dict(report), indent=2), []
    if args.output == "yaml":
        return 0, yaml.safe_dump(preview.as_dict(report), sort_keys=False).rstrip(), []
    return 0, preview.text(report), []


def main(argv: Sequence[str] | None = None) -> None:
    code, out, errors = run(argv)
    if out:
        print(out)
    for line in errors:
        print(f"error: {line}", file=sys.stderr)
    sys.exit(code)


if __name__ == "__main__":
    main()
