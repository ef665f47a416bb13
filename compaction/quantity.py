"""Kubernetes resource quantities (``100m``, ``1.5Gi``, ``2e3``), as ``resource.Quantity``
reads them, in exact arithmetic. Pure.

Amounts are kept as integer milli-units of each resource (a CPU core is 1000, a byte of
memory 1000), rounded up as ``Quantity.MilliValue`` rounds: sums and comparisons are exact.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Final

_BINARY: Final = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
# One whole unit (a core, a byte, a Pod of allocatable "pods") in milli-units.
UNIT: Final = 1000
_DECIMAL: Final = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
                   "": Fraction(1), "k": Fraction(10**3), "M": Fraction(10**6),
                   "G": Fraction(10**9), "T": Fraction(10**12), "P": Fraction(10**15),
                   "E": Fraction(10**18)}
_FORM: Final = re.compile(
    r"(?P<number>[+-]?(\d+\.?\d*|\.\d+))(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?")

Resources = Mapping[str, int]  # resource name -> milli-units


def parse_quantity(text: str) -> Fraction:
    """The exact value of a quantity; ValueError with the reason for anything else."""
    m = _FORM.fullmatch(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"{text!r} is not a quantity like 100m, 512Mi or 2")
    number, suffix = Fraction(m.group("number")), m.group("suffix") or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    exponent = int(suffix[1:])
    if abs(exponent) > 30:
        raise ValueError(f"{text!r}: exponent out of range")
    return number * Fraction(10) ** exponent


@functools.lru_cache(maxsize=4096)
def milli(text: str) -> int:
    """The quantity in milli-units, rounded up. Cached: a cluster's Pods repeat a few
    quantities, and listing 150,000 of them otherwise spends most of its parsing here."""
    return math.ceil(parse_quantity(text) * 1000)


def to_milli(raw: Mapping[str, object]) -> dict[str, int]:
    """A requests or allocatable map in milli-units; entries that do not parse are left out."""
    out: dict[str, int] = {}
    for name, value in raw.items():
        try:
            out[str(name)] = milli(str(value))
        except ValueError:
            continue
    return out


def add(*amounts: Resources) -> dict[str, int]:
    out: dict[str, int] = {}
    for amount in amounts:
        for k, v in amount.items():
            out[k] = out.get(k, 0) + v
    return out


def most(amounts: Iterable[Resources]) -> dict[str, int]:
    """Per resource, the largest amount."""
    out: dict[str, int] = {}
    for amount in amounts:
        for k, v in amount.items():
            out[k] = max(out.get(k, 0), v)
    return out


def format_milli(resource: str, value: int) -> str:
    """A readable amount: ``600m`` of CPU, ``1.5Gi`` of memory, ``2`` GPUs."""
    if resource == "cpu":
        return f"{value}m" if value % 1000 else f"{value // 1000}"
    units = value / 1000
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for suffix, factor in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if units >= factor:
                return f"{units / factor:.3g}{suffix}"
        return f"{units:.0f}"
    return f"{units:g}"
