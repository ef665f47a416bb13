"""Locust user for /mutate: cycles through pre-built AdmissionReview bodies of real size.

BODIES names a file of newline-separated JSON bodies; RATE (requests/s per user) switches
from flat-out to a constant rate.
"""

from __future__ import annotations

import itertools
import os

from locust import constant, constant_throughput, task
from locust.contrib.fasthttp import FastHttpUser

_BODIES = [line for line in open(os.environ["BODIES"]).read().splitlines() if line]
_RATE = float(os.environ.get("RATE", "0"))


class Admission(FastHttpUser):
    insecure = True  # loopback, a throwaway certificate; the API server run checks TLS for real
    wait_time = constant_throughput(_RATE) if _RATE else constant(0)

    def on_start(self) -> None:
        self._bodies = itertools.cycle(_BODIES[hash(id(self)) % len(_BODIES):] + _BODIES)

    @task
    def mutate(self) -> None:
        with self.client.post("/mutate", data=next(self._bodies),
                              headers={"Content-Type": "application/json"},
                              catch_response=True) as resp:
            if resp.status_code != 200 or b'"allowed":true' not in (resp.content or b""):
                resp.failure(f"HTTP {resp.status_code}")
