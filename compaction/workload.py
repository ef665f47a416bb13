"""Workload kinds Compactor understands, and the facts about one workload that matching needs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final


class WorkloadType(StrEnum):
    DEPLOYMENT = "Deployment"
    STATEFUL_SET = "StatefulSet"
    CRON_JOB = "CronJob"
    ROLLOUT = "Rollout"
    JOB = "Job"
    ANALYSIS_RUN = "AnalysisRun"
    DAEMON_SET = "DaemonSet"
    MODEL = "Model"
    STRIMZI_POD_SET = "StrimziPodSet"


DEFAULT_WORKLOAD_TYPES: Final = (
    WorkloadType.DEPLOYMENT, WorkloadType.STATEFUL_SET, WorkloadType.CRON_JOB,
    WorkloadType.ROLLOUT, WorkloadType.JOB, WorkloadType.ANALYSIS_RUN,
    WorkloadType.DAEMON_SET, WorkloadType.MODEL,
)

@dataclass(frozen=True)
class Workload:
    """What scope matching looks at: kind, place, labels of workload, template and namespace."""

    kind: WorkloadType
    namespace: str
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    template_labels: Mapping[str, str] = field(default_factory=dict)
    namespace_labels: Mapping[str, str] = field(default_factory=dict)
