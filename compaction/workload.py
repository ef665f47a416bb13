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

# API group/version of each kind, for owner lookups and watches.
API_VERSIONS: Final[Mapping[WorkloadType, str]] = {
    WorkloadType.DEPLOYMENT: "apps/v1",
    WorkloadType.STATEFUL_SET: "apps/v1",
    WorkloadType.DAEMON_SET: "apps/v1",
    WorkloadType.CRON_JOB: "batch/v1",
    WorkloadType.JOB: "batch/v1",
    WorkloadType.ROLLOUT: "argoproj.io/v1alpha1",
    WorkloadType.ANALYSIS_RUN: "argoproj.io/v1alpha1",
    WorkloadType.STRIMZI_POD_SET: "core.strimzi.io/v1beta2",
    WorkloadType.MODEL: "kubeai.org/v1",
}


@dataclass(frozen=True)
class Workload:
    """What scope matching looks at: kind, place, labels of workload, template and namespace."""

    kind: WorkloadType
    namespace: str
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    template_labels: Mapping[str, str] = field(default_factory=dict)
    namespace_labels: Mapping[str, str] = field(default_factory=dict)
