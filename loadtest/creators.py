"""Concurrent Pod creation through the API server: the load an admission webhook meets when
ReplicaSets scale out, as the API server itself measures it.

``parallel`` creators each POST Pods one after another until ``total`` are made; the API
server's own histogram of calls to the webhook under test
(``apiserver_admission_webhook_admission_duration_seconds``) gives its latency, the wall time
the creation rate. Pods stay Pending (no scheduler runs where this is used), so what is
measured is admission and storage alone; ``clear`` deletes them between runs.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass
from typing import Any

import httpx

from compaction import names
from localcluster import Kube
from localcluster.cluster import scrape
from localcluster.cluster.kube import Credentials, path

WEBHOOK_LATENCY = "apiserver_admission_webhook_admission_duration_seconds"
RUN_LABEL = "compactor.dev/bench-run"


@dataclass(frozen=True)
class Creation:
    pods: int
    seconds: float
    failures: int
    mutated: int  # answers that carry the label the webhook under test sets

    @property
    def per_second(self) -> float:
        return self.pods / self.seconds if self.seconds else float("nan")


async def _create(creds: Credentials, namespace: str, pod: dict[str, Any], total: int,
                  parallel: int, mutated_label: str) -> Creation:
    tls = ssl.create_default_context(cafile=str(creds.ca))
    tls.load_cert_chain(str(creds.cert), str(creds.key))
    url = path("pods", namespace)
    left = [total]
    failures = mutated = 0

    async def creator(client: httpx.AsyncClient) -> None:
        nonlocal failures, mutated
        while left[0] > 0:
            left[0] -= 1
            resp = await client.post(url, json=pod)
            if resp.status_code != 201:
                failures += 1
                continue
            labels = (resp.json().get("metadata") or {}).get("labels") or {}
            mutated += mutated_label in labels

    limits = httpx.Limits(max_connections=parallel, max_keepalive_connections=parallel)
    async with httpx.AsyncClient(base_url=creds.server, verify=tls, limits=limits,
                                 timeout=60) as client:
        started = time.monotonic()
        await asyncio.gather(*(creator(client) for _ in range(parallel)))
        seconds = time.monotonic() - started
    return Creation(total, seconds, failures, mutated)


def create_pods(creds: Credentials, namespace: str, pod: dict[str, Any], total: int,
                parallel: int = 16, mutated_label: str = names.POLICY_LABEL) -> Creation:
    body = {**pod, "metadata": {**pod.get("metadata", {}), "labels": {
        **(pod.get("metadata", {}).get("labels") or {}), RUN_LABEL: "yes"}}}
    return asyncio.run(_create(creds, namespace, body, total, parallel, mutated_label))


def clear(kube: Kube, namespace: str) -> None:
    """Deletes every Pod of the namespace (Pending ones go at once)."""
    kube.request("DELETE", path("pods", namespace))


def webhook_histogram(kube: Kube, webhook: str) -> scrape.Buckets:
    """The API server's histogram of its calls to the webhook named ``webhook``, summed over
    its label sets (admit calls only)."""
    return scrape.histogram(kube.raw("/metrics").text, WEBHOOK_LATENCY,
                            {"name": webhook, "type": "admit"})
