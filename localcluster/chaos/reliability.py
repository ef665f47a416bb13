"""What a fault cost, decided from records alone (the audit log, the harness's Pod timeline,
the descheduler runs, the Lease's holders). Pure: the chaos run and its tests collect the
records, these functions judge them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from localcluster.chaos.audit import AuditEvent
from localcluster.chaos.timeline import PodState


@dataclass(frozen=True)
class Limits:
    per_node: int
    per_namespace: int
    total: int


@dataclass(frozen=True)
class DeschedulerRun:
    started: float  # wall-clock seconds
    ended: float
    evicted: tuple[tuple[str, str], ...]  # (namespace/name, node), as its log says


@dataclass(frozen=True)
class FaultReport:
    fault: str
    pods_created: int
    creations_failed: int
    failed_window_s: float | None  # first to last failed creation
    failed_open: int  # admissions the API server let through without the webhook
    webhook_failed_open: int  # answered by the webhook without a patch (a lookup timed out)
    admission_p99_ms: float
    converge_s: float | None  # None: not converged within the bound
    duplicate_evictions: int
    evictions_over_limits: int
    suppression_lost: int
    takeover_s: float | None
    lease_s: float
    webhook_rss_mib: float
    controller_rss_mib: float
    note: str = ""
    stranded: int | None = None  # Pods left waiting on a missing scheduler past the bound


def duplicate_evictions(events: Iterable[AuditEvent]) -> int:
    """Evictions the API server granted for a Pod it had already granted one for."""
    granted = Counter((e.namespace, e.name) for e in events if e.ok)
    return sum(n - 1 for n in granted.values() if n > 1)


def failed_window(creations: Sequence[AuditEvent]) -> float | None:
    failed = sorted(e.at for e in creations if not e.ok)
    return (failed[-1] - failed[0]).total_seconds() if failed else None


def over_limits(runs: Iterable[DeschedulerRun], limits: Limits) -> int:
    """Evictions past a descheduler run's per-node, per-namespace or total limit."""
    over = 0
    for run in runs:
        per_node = Counter(node for _, node in run.evicted)
        per_ns = Counter(pod.split("/", 1)[0] for pod, _ in run.evicted)
        over += max(
            max(0, len(run.evicted) - limits.total),
            sum(max(0, n - limits.per_node) for n in per_node.values()),
            sum(max(0, n - limits.per_namespace) for n in per_ns.values()))
    return over


def hook_overlaps(records: Sequence[PodState], evictions: Sequence[AuditEvent],
                  desired: Callable[[str, float], int], workload_of: Callable[[str, str],
                                                                     str | None]) -> int:
    """Runtime-hook evictions of a workload that came before the workload was back at full
    strength (all its Pods Ready, none terminating, as many as asked) after the previous
    one: the hook replaces one Pod at a time, so each of these is one too many.

    Replays the Pod timeline and the evictions in time order; ``desired`` says how many
    replicas were asked of a workload at a moment, ``workload_of`` which workload a Pod
    (namespace, name) belongs to. The eviction of a Pod no node ever took is not the hook's
    (it replaces a Pod stranded on a missing scheduler, and takes nothing that runs).
    """
    events: list[tuple[float, int, object]] = [(r.at, 0, r) for r in records]
    events += [(e.at.timestamp(), 1, e) for e in evictions if e.ok]
    events.sort(key=lambda t: (t[0], t[1]))
    pods: dict[str, dict[str, PodState]] = {}
    whole: dict[str, bool] = {}
    overlaps = 0

    def settled(workload: str, at: float) -> bool:
        members = pods.get(workload, {}).values()
        return all(p.ready and not p.deleting for p in members) and \
            len(members) >= desired(workload, at)

    for at, _, item in events:
        if isinstance(item, PodState):
            members = pods.setdefault(item.workload, {})
            if item.present:
                members[item.name] = item
            else:
                members.pop(item.name, None)
            if settled(item.workload, at):
                whole[item.workload] = True
        elif isinstance(item, AuditEvent):
            workload = workload_of(item.namespace, item.name)
            if workload is None:
                continue
            state = pods.get(workload, {}).get(item.name)
            if state is not None and not state.bound:
                continue
            if not whole.get(workload, True) and not settled(workload, at):
                overlaps += 1
            whole[workload] = False
    return overlaps


def takeover(holders: Sequence[tuple[float, str]], killed_at: float, killed: str
             ) -> float | None:
    """Seconds from the kill to the first moment another replica held the Lease."""
    for at, holder in holders:
        if at >= killed_at and holder and holder != killed:
            return at - killed_at
    return None


def p99_ms(seconds: float) -> float:
    return float("nan") if math.isnan(seconds) else 1000 * seconds


COLUMNS = ("fault", "Pods created", "creations failed (window)",
           "failed open: API server / webhook",
           "admission p99 ms", "converge s", "duplicate evictions", "evictions above limits",
           "suppression state lost", "takeover s / lease s", "Pods stranded past the bound",
           "peak RSS MiB webhook / controller")


def _num(value: float | None, digits: int = 0, missing: str = "—") -> str:
    if value is None or math.isnan(value):
        return missing
    return f"{value:.{digits}f}"


def row(r: FaultReport) -> tuple[str, ...]:
    failed = str(r.creations_failed)
    if r.failed_window_s is not None:
        failed += f" ({r.failed_window_s:.1f} s)"
    takeover = f"{r.takeover_s:.1f} / {r.lease_s:.0f}" if r.takeover_s is not None else "—"
    return (r.fault + (f" ({r.note})" if r.note else ""), str(r.pods_created), failed,
            f"{r.failed_open} / {r.webhook_failed_open}", _num(r.admission_p99_ms, 0),
            _num(r.converge_s, 1, "not"),
            str(r.duplicate_evictions), str(r.evictions_over_limits), str(r.suppression_lost),
            takeover, "—" if r.stranded is None else str(r.stranded),
            f"{r.webhook_rss_mib:.0f} / {r.controller_rss_mib:.0f}")


def table(reports: Iterable[FaultReport]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    lines += ["| " + " | ".join(row(r)) + " |" for r in reports]
    return "\n".join(lines)


def leaks(secrets: Mapping[str, str], logs: Mapping[str, str]) -> list[tuple[str, str]]:
    """(secret, log) for every planted secret value found in a log."""
    return [(name, log) for name, value in secrets.items() for log, text in logs.items()
            if value and value in text]
