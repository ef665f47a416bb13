"""The webhook's exceptions, as one tree.

::

    WebhookError
     ├── RejectedRequest          the body is no AdmissionReview we can answer: an HTTP error,
     │    │                       never an admission verdict
     │    ├── MalformedReview     HTTP 400
     │    └── BodyTooLarge        HTTP 413
     ├── AdmittedUnchanged        a Pod CREATE we answer with allowed and no patch, counted in
     │    │                       compactor_admission_failed_open_total by ``reason``
     │    ├── UnpatchableObject   malformed_object: no JSONPatch of ours could apply to it
     │    ├── InvalidOwnerReference  invalid_owner: an owner reference no lookup may be built from
     │    ├── LookupFailed        api_error: the API server did not answer an owner lookup
     │    └── UnusableIntent      unknown_intent: the workload's intent cannot be read
     └── OptedOut                 not a failure: an owner up the chain opted out (skipped)

The admitter turns every one of the middle branch (and a timeout, and any other exception)
into its decision; the endpoint only turns ``RejectedRequest`` into HTTP errors.
"""

from __future__ import annotations

from typing import ClassVar


class WebhookError(Exception):
    """Base of every exception the webhook raises on purpose."""


class RejectedRequest(WebhookError):
    status: ClassVar[int] = 400
    reason: ClassVar[str] = "malformed_review"


class MalformedReview(RejectedRequest):
    """Not JSON, not an ``admission.k8s.io/v1`` AdmissionReview, or without request/uid."""


class BodyTooLarge(RejectedRequest):
    status = 413
    reason = "too_large"


class AdmittedUnchanged(WebhookError):
    reason: ClassVar[str] = "internal"


class UnpatchableObject(AdmittedUnchanged):
    """The object is missing the maps a patch must go into (metadata, spec) or has the wrong
    type where a patch would write: no patch could apply."""

    reason = "malformed_object"


class InvalidOwnerReference(AdmittedUnchanged):
    """A name, namespace or apiVersion that fails the API server's rules, or a kind whose
    group is not the one Compactor knows: nothing is requested for it."""

    reason = "invalid_owner"


class LookupFailed(AdmittedUnchanged):
    """The API server could not answer an owner lookup (anything but a 404)."""

    reason = "api_error"


class UnusableIntent(AdmittedUnchanged):
    """The workload's intent annotation has an unknown version or cannot be parsed."""

    reason = "unknown_intent"


class OptedOut(WebhookError):
    """An owner up the chain carries ``compactor.dev/ignore: "true"``."""
