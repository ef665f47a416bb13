"""The webhook's connection limits come from the environment, each under its own name."""

from __future__ import annotations

import pytest

from webhook.settings import Settings

LIMITS = [
    ("COMPACTOR_WEBHOOK_MAX_CONNECTIONS", "64", "max_connections", 64),
    ("COMPACTOR_WEBHOOK_KEEP_ALIVE_SECONDS", "30", "keep_alive_seconds", 30),
    ("COMPACTOR_WEBHOOK_MAX_HEADER_BYTES", "8192", "max_header_bytes", 8192),
    ("COMPACTOR_WEBHOOK_TLS_HANDSHAKE_TIMEOUT_SECONDS", "1.5",
     "tls_handshake_timeout_seconds", 1.5),
    ("COMPACTOR_WEBHOOK_READ_TIMEOUT_SECONDS", "2", "read_timeout_seconds", 2.0),
    ("COMPACTOR_WEBHOOK_WRITE_TIMEOUT_SECONDS", "3", "write_timeout_seconds", 3.0),
]


@pytest.mark.parametrize(("variable", "raw", "field", "value"), LIMITS,
                         ids=[c[0] for c in LIMITS])
def test_each_connection_limit_is_read_from_its_variable(variable: str, raw: str, field: str,
                                                         value: float) -> None:
    settings = Settings.from_env({variable: raw})
    assert getattr(settings, field) == value
    assert getattr(Settings(), field) != value  # the variable, not the default, set it


@pytest.mark.parametrize("variable", [c[0] for c in LIMITS])
def test_a_limit_that_is_not_a_positive_number_is_refused(variable: str) -> None:
    for raw in ("0", "-1", "many"):
        with pytest.raises(ValueError, match=variable):
            Settings.from_env({variable: raw})


@pytest.mark.parametrize(("env", "exempt"), [
    ({}, frozenset({"kai-scheduler"})),
    ({"COMPACTOR_WEBHOOK_EXEMPT_SCHEDULERS": "kai-scheduler, volcano"},
     frozenset({"kai-scheduler", "volcano"})),
    ({"COMPACTOR_WEBHOOK_EXEMPT_SCHEDULERS": ""}, frozenset()),
])
def test_the_exempt_schedulers_are_a_setting(env: dict[str, str], exempt: frozenset[str]
                                             ) -> None:
    assert Settings.from_env(env).exempt_schedulers == exempt
