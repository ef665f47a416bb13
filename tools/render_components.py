"""Prints, as YAML, the objects the controller creates at run time for a sample policy (the
compaction scheduler's ConfigMap and Deployment, the policy's descheduler ConfigMap and
CronJob), rendered by the controller's own functions with the settings of a default install,
for `make lint`'s policy scan; and beside them the NetworkPolicies of deploy/network/ that
select those Pods, which an install ships (the scan links a Pod to its policy only within
one input)."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# The checkout, not an installed copy.
from compaction.validation import parse_policy  # noqa: E402
from controller.components import descheduler, scheduler  # noqa: E402
from controller.components.pod_settings import scheduler_image  # noqa: E402
from controller.process.settings import load  # noqa: E402

POLICY = {
    "apiVersion": "compactor.dev/v1alpha1", "kind": "ClusterCompactionPolicy",
    "metadata": {"name": "sample", "uid": "00000000-0000-0000-0000-000000000001"},
    "spec": {"scope": {"namespaceSelector": {"operator": "In", "values": ["shop"]}},
             "scheduler": {"useKubexScheduler": True},
             "descheduler": {"enabled": True, "interval": "*/15 * * * *"}},
}


def main() -> None:
    runtime = load({}).runtime
    policy = parse_policy(POLICY)
    versions = dict(line.split("=", 1) for line in (ROOT / "tools/versions.env").read_text()
                    .splitlines() if line and not line.startswith("#"))
    image = scheduler_image(runtime.scheduler_image_override, None, None,
                            versions["KUBERNETES_VERSION"])
    config = scheduler.scheduler_configmap()
    config_hash = hashlib.sha256(config["data"][scheduler.CONFIG_KEY].encode()).hexdigest()[:12]
    objects = [
        config, scheduler.scheduler_deployment(runtime.scheduler, image, config_hash),
        descheduler.descheduler_configmap(policy, descheduler.render_descheduler_policy(
            policy, {})),
        descheduler.descheduler_cronjob(policy, runtime.descheduler, suspend=False),
    ]
    objects += [policy for component in ("scheduler", "descheduler")
                for policy in yaml.safe_load_all((ROOT / "deploy" / "network" /
                                                  f"{component}.yaml").read_text())]
    yaml.safe_dump_all(objects, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
