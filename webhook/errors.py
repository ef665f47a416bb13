"""The webhook's exceptions, as one tree.

::

    WebhookError
     ├── RejectedRequest          the body is no AdmissionReview we can answer: an HTTP error,
     │    │                       never an admission verdict
     │    ├── MalformedReview     HTTP 400
     │    ├── MalformedExtenderArgs  HTTP 400: the scheduler's ExtenderArgs, unreadable
     │    └── BodyTooLarge        HTTP 413
     ├── AdmittedUnchanged        a Pod CREATE we answer with allowed and no patch, counted in
     │    │                       compactor_admission_failed_open_total by ``reason``
     │    ├── UnpatchableObject   malformed_object: no JSONPatch of ours could apply to it
     │    ├── InvalidOwnerReference  invalid_owner: an owner reference no lookup may be built from
     │    ├── LookupFailed        api_error: the API server did not answer an owner lookup
     │    └── UnusableIntent      unknown_intent: the workload's intent cannot be read
     ├── OptedOut                 not a failure: an owner up the chain opted out (skipped)
     ├── CertificateMismatch      (also a RuntimeError) the serving certificate does not cover
     │                            the Service names: refused at start, not reloaded after
     ├── CredentialsError         (also a RuntimeError) neither in a cluster nor a readable
     │                            kubeconfig: no reader for the API server
     ├── NotServed                a watched resource is not served (its CRD is not installed)
     └── WatchExpired             a watch's resourceVersion is too old (410 Gone): list again

The admitter turns every one of the ``AdmittedUnchanged`` branch (and a timeout, and any other
exception) into its decision; the endpoint only turns ``RejectedRequest`` into HTTP errors.
The last four never reach an admission: ``CertificateMismatch`` and ``CredentialsError`` are
met while the server starts (and the certificate reloader keeps the old pair on a mismatch),
the owner feed restarts its watch on ``NotServed`` and ``WatchExpired``.
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


class MalformedExtenderArgs(RejectedRequest):
    """Not JSON, or no Pod and candidate nodes, on the extender's ``/prioritize``."""

    reason = "malformed_args"


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


class CertificateMismatch(WebhookError, RuntimeError):
    """The certificate file lacks a name the API server dials the webhook Service by."""


class CredentialsError(WebhookError, RuntimeError):
    """No in-cluster ServiceAccount and no kubeconfig, or a kubeconfig that cannot be read."""


class NotServed(WebhookError):
    """The API server does not serve this resource (its CRD is not installed)."""


class WatchExpired(WebhookError):
    """The resourceVersion is too old to resume from (410 Gone): list again."""
