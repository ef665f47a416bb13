"""The files a person gives: policies (``-f``, validated as the controller validates them) and
prices (``--price``, ``--price-per-node``)."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from compaction import names
from compaction.problem import Problem
from controller.snapshot.policies import (
    EvaluationInfo,
    PolicyInfo,
    parse_evaluation_info,
    parse_policy_info,
)
from controller.snapshot.snapshot import Snapshot
from kubectl_compactor.failure import Failure

INSTANCE_TYPE_LABEL: Final = "node.kubernetes.io/instance-type"


@dataclass(frozen=True)
class Policies:
    """The policies to judge (from files or from the cluster), and what is wrong with them."""

    policies: tuple[PolicyInfo, ...] = ()
    evaluation: EvaluationInfo | None = None
    problems: tuple[str, ...] = ()  # one line each: where, which object, field path, message


def _problem_lines(source: str, what: str, problems: Iterable[Problem]) -> list[str]:
    return [f"{source}: {what}: {p.path}: {p.message}" for p in problems]


def read_documents(documents: Iterable[tuple[str, Any]]) -> Policies:
    """Policies (and a PolicyEvaluation) from YAML documents, each with where it came from
    (``file#n``), through the controller's validation; every problem with its field path."""
    policies: list[PolicyInfo] = []
    evaluation: EvaluationInfo | None = None
    problems: list[str] = []
    for source, doc in documents:
        if doc is None:
            continue  # an empty document between two ---
        if not isinstance(doc, Mapping):
            problems.append(f"{source}: (document): is a {type(doc).__name__}, not an object")
            continue
        kind = doc.get("kind")
        raw_meta = doc.get("metadata")
        meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
        what = f"{kind or '(no kind)'}/{meta.get('name') or '(no name)'}"
        version_problems = [] if doc.get("apiVersion") == names.API_VERSION else [
            Problem("apiVersion", f"must be {names.API_VERSION}")]
        if kind == names.EVALUATION_KIND:
            found = parse_evaluation_info(doc)
            problems += _problem_lines(source, what, [*version_problems, *found.problems])
            evaluation = found
            continue
        if kind == names.NAMESPACED_POLICY_KIND and not meta.get("namespace"):
            # As kubectl apply would: the default namespace.
            doc = {**doc, "metadata": {**meta, "namespace": "default"}}
        found_policy = parse_policy_info(doc)
        problems += _problem_lines(source, what,
                                   [*version_problems, *found_policy.problems])
        policies.append(found_policy)
    return Policies(tuple(policies), evaluation, tuple(problems))


def cluster_policies(snapshot: Snapshot) -> Policies:
    """The cluster's own policies and PolicyEvaluation, with their problems."""
    problems: list[str] = []
    for p in snapshot.policies:
        problems += _problem_lines("cluster", f"{p.kind}/{p.id}", p.problems)
    if snapshot.evaluation is not None:
        problems += _problem_lines("cluster", f"{names.EVALUATION_KIND}/"
                                   f"{names.EVALUATION_NAME}", snapshot.evaluation.problems)
    return Policies(snapshot.policies, snapshot.evaluation, tuple(problems))


def with_policies(snapshot: Snapshot, chosen: Policies) -> Snapshot:
    """The snapshot as the controller would read it with ``chosen`` applied."""
    return dataclasses.replace(snapshot, policies=chosen.policies,
                               evaluation=chosen.evaluation or snapshot.evaluation)


# --- prices ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Prices:
    """Hourly prices: per instance type (the node's ``node.kubernetes.io/instance-type``),
    else a flat one per node."""

    by_type: Mapping[str, float] = field(default_factory=dict)
    per_node: float | None = None

    @property
    def given(self) -> bool:
        return bool(self.by_type) or self.per_node is not None

    def hourly(self, labels: Mapping[str, str]) -> float | None:
        kind = labels.get(INSTANCE_TYPE_LABEL)
        if kind is not None and kind in self.by_type:
            return self.by_type[kind]
        return self.per_node


NO_PRICES: Final = Prices()


def parse_prices(raw: Any, source: str) -> tuple[dict[str, float], list[str]]:
    """A price file: a mapping of instance type to hourly price."""
    if not isinstance(raw, Mapping):
        return {}, [f"{source}: must map instance types to hourly prices"]
    out: dict[str, float] = {}
    problems = []
    for kind, price in raw.items():
        if isinstance(price, bool) or not isinstance(price, int | float) or price < 0:
            problems.append(f"{source}: {kind}: the hourly price must be a number >= 0")
        else:
            out[str(kind)] = float(price)
    return out, problems


def _load_yaml(file: str, many: bool) -> Any:
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text()
        return list(yaml.safe_load_all(text)) if many else yaml.safe_load(text)
    except OSError as e:
        raise Failure(f"{file}: cannot read: {e.strerror or e}") from e
    except yaml.YAMLError as e:
        raise Failure(f"{file}: not YAML: {' '.join(str(e).split())}") from e


def policy_files(files: Sequence[str]) -> Policies:
    docs = [(f"{file}#{i}", doc) for file in files
            for i, doc in enumerate(_load_yaml(file, many=True), 1)]
    chosen = read_documents(docs)
    if not chosen.problems and not chosen.policies:
        raise Failure(f"{', '.join(files)}: no ClusterCompactionPolicy or CompactionPolicy")
    return chosen


def prices(file: str | None, per_node: float | None) -> Prices:
    if per_node is not None and per_node < 0:
        raise Failure("--price-per-node: must be >= 0")
    by_type: dict[str, float] = {}
    if file is not None:
        by_type, problems = parse_prices(_load_yaml(file, many=False), file)
        if problems:
            raise Failure(*problems)
    return Prices(by_type, per_node)
