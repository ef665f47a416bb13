"""The stack's own ceiling: Starlette on uvicorn with TLS, answering a fixed AdmissionReview.

Same server, same TLS, same body parsing of the uid (the least any webhook must do), and none
of Compactor's work, so the warm run's throughput can be read as a fraction of this one.
"""

from __future__ import annotations

import os

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from webhook.tls import read_one_record_at_a_time


async def mutate(request: Request) -> Response:
    review = orjson.loads(await request.body())
    body = orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                         "response": {"uid": review["request"]["uid"], "allowed": True}})
    return Response(body, media_type="application/json")


async def healthz(_: Request) -> Response:
    return Response("ok")


app = Starlette(routes=[Route("/mutate", mutate, methods=["POST"]),
                        Route("/readyz", healthz)])

if __name__ == "__main__":
    read_one_record_at_a_time()  # as the webhook's server does
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ["PORT"]),
                ssl_certfile=os.environ["CERT_FILE"], ssl_keyfile=os.environ["KEY_FILE"],
                workers=1, access_log=False, log_level="warning")
