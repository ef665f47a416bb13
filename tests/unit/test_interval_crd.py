"""The policy CRDs refuse exactly the descheduler intervals ``compaction.cron`` refuses, and name
the same cron field: their regular expressions, read from the CRD files, against the parser."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.cron import FIELDS, MAX_LENGTH, cron_problems
from tests.cron_rules import (
    CLUSTER_CRD,
    NAMESPACED_CRD,
    build_rules,
    failing_rules,
    interval_schema,
    random_schedule,
    sample_schedules,
)

SCHEMA = interval_schema(CLUSTER_CRD)


def crd_refusals(value: str) -> set[str]:
    """What the CRD refuses ``value`` for: its length, the field count, or cron fields by name
    (a too-long value is judged on its length alone, as the parser does)."""
    if len(value) > SCHEMA["maxLength"]:
        return {"length"}
    return {"fields" if i == 0 else FIELDS[i - 1][0] for i in failing_rules(SCHEMA, value)}


def cron_refusals(value: str) -> set[str]:
    out = set()
    for problem in cron_problems(value):
        if problem.startswith("must be at most"):
            out.add("length")
        elif problem.startswith("must have 5 fields"):
            out.add("fields")
        else:
            out.add(next(name for name, *_ in FIELDS if problem.startswith(f"{name} field")))
    return out


@pytest.mark.parametrize("crd", [CLUSTER_CRD, NAMESPACED_CRD], ids=lambda p: p.name)
def test_the_crds_hold_the_rules_built_from_the_cron_table(crd: Path) -> None:
    schema = interval_schema(crd)
    assert schema["maxLength"] == MAX_LENGTH
    assert schema["x-kubernetes-validations"] == build_rules()


@pytest.mark.parametrize(("value", "refused"), [
    ("*/30 * * * *", set()), ("0 */2 * * *", set()), ("5,35 1-5 * * mon-fri", set()),
    ("0 0 1 jan,jul *", set()), ("*/15 0-23/2 1-31 1-12 0-6", set()), ("0 3 * * SUN", set()),
    ("30 4 ? * ?", set()), ("59 23 31 12 6", set()), ("00 000 01 DeC-dec sat", set()),
    ("0 0 * feb-12 1-sat", set()), ("5/10 * * * *", set()), ("1-1 * * * *", set()),
    ("\t0  0\n* * *\n", set()), ("*/" + "9" * 18 + " * * * *", set()),
    ("0 24 * * *", {"hour"}), ("60 * * * *", {"minute"}), ("0 0 0 * *", {"day of month"}),
    ("0 0 32 * *", {"day of month"}), ("0 0 * 13 *", {"month"}), ("0 0 * 0 *", {"month"}),
    ("0 0 * * 7", {"day of week"}), ("0 0 * * 8", {"day of week"}),
    ("*/0 * * * *", {"minute"}), ("5-2 * * * *", {"minute"}), ("0 0 * * fri-mon", {"day of week"}),
    ("0 0 * dec-jan *", {"month"}), ("*/ * * * *", {"minute"}), ("*/x * * * *", {"minute"}),
    ("*/" + "1" * 19 + " * * * *", {"minute"}), ("1/2/3 * * * *", {"minute"}),
    ("1,,2 * * * *", {"minute"}), ("+1 * * * *", {"minute"}), ("-1 * * * *", {"minute"}),
    ("*-5 * * * *", {"minute"}), ("jan * * * *", {"minute"}), ("0 0 * * \u017fun", {"day of week"}),
    ("\u0663 * * * *", {"minute"}), ("\uff15 * * * *", {"minute"}),
    ("60 24 0 13 7", {"minute", "hour", "day of month", "month", "day of week"}),
    ("30s", {"fields"}), ("1m", {"fields"}), ("0 */5 * * * *", {"fields"}), ("", {"fields"}),
    ("* * * *", {"fields"}), ("0\v* * * *", {"fields"}), ("0\u00a0* * * *", {"fields"}),
    ("0\u00a0* * * * *", {"minute"}),
    ("0," * 300 + "0 * * * *", {"length"}),
])
def test_table(value: str, refused: set[str]) -> None:
    assert cron_refusals(value) == refused
    assert crd_refusals(value) == refused


def test_generated_schedules() -> None:
    values = sample_schedules(20_000, seed=7)
    assert sum(not cron_problems(v) for v in values) > 5_000  # valid ones are well covered
    for value in values:
        assert crd_refusals(value) == cron_refusals(value), repr(value)


@settings(max_examples=400, deadline=None)
@given(st.randoms(use_true_random=False))
def test_crd_agrees_with_the_parser(rng: random.Random) -> None:
    value = random_schedule(rng)
    assert crd_refusals(value) == cron_refusals(value)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="0123456789*?/-, \t\n\v\u00a0abcdefjmnorstuJMS\u0663", max_size=40))
def test_crd_agrees_with_the_parser_on_any_text(value: str) -> None:
    assert crd_refusals(value) == cron_refusals(value)
