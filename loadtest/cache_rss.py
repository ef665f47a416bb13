"""Peak RSS of a webhook process whose owner cache (or, with ``feed``, whose watch feed)
holds N owners (default 100,000): ``python -m loadtest.cache_rss [N] [cache|feed]``.

Imports the webhook exactly as the server does, parses N realistic owner objects (with the
intent annotation and an owner reference) through the cache's own code path, and reports
VmRSS and VmHWM from /proc. Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from compaction import names
from compaction.intent import Intent
from localcluster.cluster.procstat import peak_rss_mib, rss_mib
from webhook.feed import KindStore
from webhook.metrics import Metrics
from webhook.owners import OwnerCache, record_of
from webhook.server import Webhook  # noqa: F401  (the server's imports, as in production)


async def _never(path: str) -> None:
    raise AssertionError(path)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    feed = len(sys.argv) > 2 and sys.argv[2] == "feed"
    base = rss_mib(os.getpid())
    cache = OwnerCache(_never, Metrics(), maxsize=n)
    store = KindStore(synced=True)
    for i in range(n):
        ns, name = f"ns-{i % 500}", f"app-{i}"
        intent = Intent(f"policy-{i % 20}", {names.POLICY_LABEL: f"policy-{i % 20}"},
                        names.MANAGED_SCHEDULER)
        uid = f"{i:08d}-0000-4000-8000-000000000000"
        obj: dict[str, Any] = {"metadata": {
            "name": name, "namespace": ns, "uid": uid,
            "labels": {"app": name, names.POLICY_LABEL: intent.policy},
            "annotations": {names.INTENT_ANNOTATION: intent.render()},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                 "name": name, "uid": f"d{i:07d}", "controller": True}]}}
        if feed:
            store.apply("ADDED", obj)
        else:
            cache.put((ns, "ReplicaSet", name, uid), record_of(obj))
    held = len(store.objects) if feed else len(cache)
    print(json.dumps({"owners": held, "rss_mib": rss_mib(os.getpid()),
                      "peak_mib": peak_rss_mib(os.getpid()), "baseline_mib": base}))


if __name__ == "__main__":
    main()
