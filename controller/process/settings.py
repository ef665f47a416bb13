"""The controller's settings, read from its environment in one place, every problem at once.

``COMPACTOR_*`` configure the controller itself; ``COMPACTION_DESCHEDULER_*`` and
``COMPACTION_SCHEDULER_*`` the Pods it creates (as the reference's chart passes them), plus
``COMPACTION_OPENSHIFT`` for arbitrary-UID security contexts. A bad value is refused at
start-up with its variable named; all bad values are reported together.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from certs.authority import service_names
from certs.manager import CertSettings
from certs.rotation import Lifetimes, Names
from compaction import names
from compaction.duration import parse_duration
from compaction.intent import parse_exempt_schedulers
from controller.act.executor import PATCH_CONCURRENCY
from controller.components.pod_settings import (
    DEFAULT_RESOURCES,
    DESCHEDULER_IMAGE,
    SCHEDULER_REPOSITORY,
    PodRuntime,
    RuntimeSettings,
    is_digest,
    pinned,
    restricted_security_context,
    scheduler_image,
)
from controller.plan.settings import PlanSettings

# A pass starts no Pod patch after this long from its first write (or three times its plan's
# time, when longer: ``reconciler.write_budget``); the next pass, at once, goes on with the
# rest (so that no pass runs much past it, whatever the number of Pods).
PASS_BUDGET_SECONDS: Final = 4.0
# The pass loop not come round for this long fails /livez. One round is at most a wait for the
# caches (60 s, a new leader's first pass) and a pass (at 5,000 nodes and 150,500 Pods: 3.7 s
# in-process, 16 s to list and plan everything; docs/benchmarks.md): well above both.
STALLED_AFTER_SECONDS: Final = 300.0
# An idle loop waits a third of its 15 s lease, then its 1 s debounce: no bound may be below it.
IDLE_ROUND_SECONDS: Final = 10.0
_PULL_POLICIES: Final = frozenset({"Always", "IfNotPresent", "Never"})
_CERT_MODES: Final = frozenset({"self", "cert-manager", "off"})


class SettingsError(ValueError):
    """Environment variables the controller cannot use; ``problems`` names each."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid controller settings: " + "; ".join(problems))


@dataclass(frozen=True)
class ControllerSettings:
    plan: PlanSettings  # what each pass's plan reads: the runtime, namespace, timings
    kubeconfig: str | None = None
    resync_seconds: float = 30.0
    debounce_seconds: float = 1.0
    lease_seconds: int = 15
    identity: str = ""
    metrics_port: int = 8080
    # All interfaces in a Pod, so Prometheus can scrape it; the local stack binds loopback.
    metrics_address: str = "0.0.0.0"
    log_level: str = "INFO"
    certs: CertSettings | None = None
    patch_concurrency: int = PATCH_CONCURRENCY  # metadata patches in flight at once
    pass_budget_seconds: float = PASS_BUDGET_SECONDS  # then Pod patches wait for the next pass
    stalled_after_seconds: float = STALLED_AFTER_SECONDS  # the loop this late fails /livez
    # A fault for tests of the liveness probe: the loop stops coming round this long after the
    # start, as a hung one would. None: never.
    fault_stall_after_seconds: float | None = None

    @property
    def runtime(self) -> RuntimeSettings:
        return self.plan.runtime

    @property
    def namespace(self) -> str:
        return self.plan.namespace


class _Env:
    """Reads variables, noting every problem instead of stopping at the first."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.problems: list[str] = []

    def text(self, name: str, default: str) -> str:
        return self.env.get(name) or default

    def number(self, name: str, default: float, positive: bool = True) -> float:
        raw = self.env.get(name)
        if raw is None or raw == "":
            return default
        try:
            value = float(raw)
        except ValueError:
            self.problems.append(f"{name} must be a number, not {raw!r}")
            return default
        if positive and value <= 0:
            self.problems.append(f"{name} must be positive, not {raw!r}")
            return default
        return value

    def at_least(self, name: str, default: float, least: float, why: str) -> float:
        value = self.number(name, default)
        if value < least:
            self.problems.append(f"{name} must be at least {least:g} ({why}), not "
                                 f"{self.env.get(name)!r}")
            return default
        return value

    def digest(self, name: str) -> str | None:
        """An image digest (sha256:<64 hex>), or None when unset."""
        raw = self.env.get(name) or None
        if raw is not None and not is_digest(raw):
            self.problems.append(f"{name} must be sha256: and 64 lowercase hex digits, not "
                                 f"{raw!r}")
            return None
        return raw

    def optional_seconds(self, name: str) -> float | None:
        """Seconds from 0 up, or None when unset."""
        raw = self.env.get(name)
        if raw is None or raw == "":
            return None
        value = self.number(name, 0.0, positive=False)
        if value < 0:
            self.problems.append(f"{name} must be 0 or more, not {raw!r}")
        return max(value, 0.0)

    def count(self, name: str, default: int, most: int) -> int:
        raw = self.env.get(name)
        if raw is None or raw == "":
            return default
        if not raw.isdigit() or not 1 <= int(raw) <= most:
            self.problems.append(f"{name} must be a whole number from 1 to {most}, not {raw!r}")
            return default
        return int(raw)

    def port(self, name: str, default: int) -> int:
        raw = self.env.get(name)
        if raw is None or raw == "":
            return default
        if not raw.isdigit() or int(raw) > 65535:
            self.problems.append(f"{name} must be a port number (0 turns it off), not {raw!r}")
            return default
        return int(raw)

    def duration(self, name: str, default: datetime.timedelta) -> datetime.timedelta:
        raw = self.env.get(name)
        if not raw:
            return default
        try:
            return parse_duration(raw)
        except ValueError as e:
            self.problems.append(f"{name}: {e}")
            return default

    def flag(self, name: str, default: bool) -> bool:
        raw = self.env.get(name)
        if raw is None or raw == "":
            return default
        if raw.lower() in ("1", "true", "yes"):
            return True
        if raw.lower() in ("0", "false", "no"):
            return False
        self.problems.append(f"{name} must be true or false, not {raw!r}")
        return default

    def choice(self, name: str, default: str, allowed: frozenset[str]) -> str:
        raw = self.env.get(name) or default
        if raw.upper() in allowed and raw not in allowed:
            raw = raw.upper()  # log levels in any case
        if raw not in allowed:
            self.problems.append(f"{name} must be one of {', '.join(sorted(allowed))}, "
                                 f"not {raw!r}")
            return default
        return raw

    def _json(self, name: str, kind: type, what: str) -> Any:
        """The JSON value of ``name`` when it is a ``kind``; None when unset or not one (the
        problem noted, ``what`` naming the kind wanted)."""
        raw = self.env.get(name)
        if not raw:
            return None
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as e:
            self.problems.append(f"{name} must be {what}: {e}")
            return None
        if not isinstance(value, kind):
            self.problems.append(f"{name} must be {what}, not {type(value).__name__}")
            return None
        return value

    def json_map(self, name: str, default: Mapping[str, Any]) -> Mapping[str, Any]:
        value = self._json(name, dict, "a JSON object")
        return default if value is None else value

    def string_map(self, name: str) -> Mapping[str, str]:
        """A JSON object of strings (a nodeSelector), empty when unset."""
        value = self.json_map(name, {})
        if not all(isinstance(v, str) for v in value.values()):
            self.problems.append(f"{name} must map names to strings, as a nodeSelector does")
            return {}
        return value

    def object_list(self, name: str) -> tuple[Mapping[str, Any], ...]:
        """A JSON array of objects (tolerations), empty when unset."""
        value = self._json(name, list, "a JSON array of objects")
        if value is None:
            return ()
        if not all(isinstance(v, dict) for v in value):
            self.problems.append(f"{name} must be a JSON array of objects")
            return ()
        return tuple(value)


def _pod_runtime(e: _Env, prefix: str, image: str, openshift: bool) -> PodRuntime:
    secrets = tuple(s.strip() for s in e.text(f"{prefix}IMAGE_PULL_SECRETS", "").split(",")
                    if s.strip())
    return PodRuntime(
        image=image,
        pull_policy=e.choice(f"{prefix}IMAGE_PULL_POLICY", "IfNotPresent", _PULL_POLICIES),
        resources=e.json_map(f"{prefix}RESOURCES", DEFAULT_RESOURCES),
        security_context=e.json_map(f"{prefix}SECURITY_CONTEXT",
                                    restricted_security_context(openshift)),
        image_pull_secrets=secrets,
        node_selector=e.string_map(f"{prefix}NODE_SELECTOR"),
        tolerations=e.object_list(f"{prefix}TOLERATIONS"),
        affinity=e.json_map(f"{prefix}AFFINITY", {}))


def _runtime(e: _Env) -> RuntimeSettings:
    openshift = e.flag("COMPACTION_OPENSHIFT", False)
    desched_image = e.text("COMPACTION_DESCHEDULER_IMAGE", DESCHEDULER_IMAGE)
    desched_digest = e.digest("COMPACTION_DESCHEDULER_IMAGE_DIGEST")
    if desched_digest and "@" in desched_image:
        e.problems.append("COMPACTION_DESCHEDULER_IMAGE has a digest already: set it there or "
                          "in COMPACTION_DESCHEDULER_IMAGE_DIGEST, not both")
    elif desched_digest:
        desched_image = pinned(desched_image, desched_digest)
    desched = _pod_runtime(e, "COMPACTION_DESCHEDULER_", desched_image, openshift)
    tag = e.text("COMPACTION_SCHEDULER_IMAGE_TAG", "") or None
    digest = e.digest("COMPACTION_SCHEDULER_IMAGE_DIGEST")
    if tag and digest:
        e.problems.append("set COMPACTION_SCHEDULER_IMAGE_TAG or _DIGEST, not both")
        digest = None
    override = e.text("COMPACTION_SCHEDULER_IMAGE", "") or (
        scheduler_image(None, tag, digest, "") if tag or digest else None)
    sched = _pod_runtime(e, "COMPACTION_SCHEDULER_", override or SCHEDULER_REPOSITORY,
                         openshift)
    return RuntimeSettings(descheduler=desched, scheduler=sched,
                           scheduler_image_override=override,
                           extender_image=e.text("COMPACTOR_EXTENDER_IMAGE", "") or None,
                           openshift=openshift)


def _certs(e: _Env, namespace: str) -> CertSettings | None:
    """Self-managed webhook TLS unless COMPACTOR_CERTS_MODE is cert-manager (or off)."""
    mode = e.choice("COMPACTOR_CERTS_MODE", "self", _CERT_MODES)
    service = e.text("COMPACTOR_WEBHOOK_SERVICE", "compactor-webhook")
    extra = [s.strip() for s in e.text("COMPACTOR_CERT_EXTRA_SANS", "").split(",") if s.strip()]
    ips = tuple(s for s in extra if s.replace(".", "").isdigit() or ":" in s)
    d = Lifetimes()
    lifetimes = Lifetimes(ca=e.duration("COMPACTOR_CERT_CA_LIFETIME", d.ca),
                          serving=e.duration("COMPACTOR_CERT_SERVING_LIFETIME", d.serving),
                          overlap=e.duration("COMPACTOR_CERT_OVERLAP", d.overlap))
    if mode != "self":
        return None
    return CertSettings(
        namespace=namespace,
        secret=e.text("COMPACTOR_WEBHOOK_SECRET", "compactor-webhook-tls"),
        webhook_configuration=e.text("COMPACTOR_WEBHOOK_CONFIGURATION", "compactor-webhook"),
        names=Names(tuple(service_names(service, namespace))
                    + tuple(s for s in extra if s not in ips), ips),
        lifetimes=lifetimes)


def _seconds(e: _Env, name: str, default: datetime.timedelta) -> datetime.timedelta:
    return datetime.timedelta(seconds=e.number(name, default.total_seconds()))


def load(env: Mapping[str, str] = os.environ) -> ControllerSettings:
    """Every setting from ``env``; SettingsError naming every bad variable."""
    e = _Env(env)
    namespace = e.text("COMPACTOR_NAMESPACE", names.INSTALL_NAMESPACE)
    d = PlanSettings(RuntimeSettings())
    # Set but empty: no scheduler is exempt.
    exempt = e.env.get("COMPACTOR_CONTROLLER_EXEMPT_SCHEDULERS",
                       ",".join(sorted(d.exempt_schedulers)))
    settings = ControllerSettings(
        plan=PlanSettings(
            runtime=_runtime(e), namespace=namespace,
            intent_grace=datetime.timedelta(seconds=e.number(
                "COMPACTOR_CONTROLLER_INTENT_GRACE_SECONDS", d.intent_grace.total_seconds(),
                positive=False)),
            drain_timeout=e.duration("COMPACTOR_CONTROLLER_DRAIN_TIMEOUT", d.drain_timeout),
            default_evaluation=e.flag("COMPACTOR_POLICY_EVALUATION_DEFAULT",
                                      d.default_evaluation),
            exempt_schedulers=parse_exempt_schedulers(exempt),
            scheduler_down_after=_seconds(e, "COMPACTOR_CONTROLLER_SCHEDULER_DOWN_AFTER_SECONDS",
                                          d.scheduler_down_after),
            scheduler_recovery=_seconds(e, "COMPACTOR_CONTROLLER_SCHEDULER_RECOVERY_SECONDS",
                                        d.scheduler_recovery),
            stranded_after=_seconds(e, "COMPACTOR_CONTROLLER_STRANDED_AFTER_SECONDS",
                                    d.stranded_after)),
        kubeconfig=e.text("COMPACTOR_CONTROLLER_KUBECONFIG", "") or e.text("KUBECONFIG", "")
        or None,
        resync_seconds=e.number("COMPACTOR_CONTROLLER_RESYNC_SECONDS", 30.0),
        identity=e.text("POD_NAME", "") or f"{socket.gethostname()}-{os.getpid()}",
        metrics_port=e.port("COMPACTOR_CONTROLLER_METRICS_PORT", 8080),
        metrics_address=e.text("COMPACTOR_CONTROLLER_METRICS_ADDRESS", "0.0.0.0"),
        log_level=e.choice("COMPACTOR_LOG_LEVEL", "INFO",
                           frozenset({"DEBUG", "INFO", "WARNING", "ERROR"})).upper(),
        certs=_certs(e, namespace),
        patch_concurrency=e.count("COMPACTOR_CONTROLLER_PATCH_CONCURRENCY", PATCH_CONCURRENCY,
                                  64),
        pass_budget_seconds=e.number("COMPACTOR_CONTROLLER_PASS_BUDGET_SECONDS",
                                     PASS_BUDGET_SECONDS),
        stalled_after_seconds=e.at_least("COMPACTOR_CONTROLLER_STALLED_AFTER_SECONDS",
                                         STALLED_AFTER_SECONDS, IDLE_ROUND_SECONDS,
                                         "an idle loop comes round every 6 s"),
        fault_stall_after_seconds=e.optional_seconds(
            "COMPACTOR_CONTROLLER_FAULT_STALL_AFTER_SECONDS"),
    )
    if e.problems:
        raise SettingsError(e.problems)
    return settings
