"""The policy CRDs' rules on ``spec.descheduler.interval``: how they are built from
``compaction.cron``'s field table, how to evaluate them in Python, and schedules to try them on.

RE2 has no arithmetic, so each cron field's rule spells out its values and, for each start of a
range, the ends that are not before it. ``python -m tests.cron_rules`` prints the rules as they
go into deploy/crds/compactor.dev_clustercompactionpolicies.yaml. The regular expressions use
only what RE2 and Python's ``re`` read alike (classes, groups, counted repeats); every one ends
in ``[\\t\\n\\f\\r ]*$``, so Python's ``$`` before a final newline changes no verdict.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import yaml

from compaction.cron import FIELDS, MAX_LENGTH, MAX_STEP

ROOT = Path(__file__).resolve().parents[1]
CLUSTER_CRD = ROOT / "deploy" / "crds" / "compactor.dev_clustercompactionpolicies.yaml"
NAMESPACED_CRD = ROOT / "deploy" / "crds" / "compactor.dev_compactionpolicies.yaml"

_SPACE = r"[\t\n\f\r ]"
_WORD = r"[^\t\n\f\r ]"
FIVE_FIELDS = rf"^{_SPACE}*{_WORD}+(?:{_SPACE}+{_WORD}+){{4}}{_SPACE}*$"
_STEP = rf"/0*[1-9][0-9]{{0,{len(str(MAX_STEP)) - 1}}}"
_ORDINAL = ["1st", "2nd", "3rd", "4th", "5th"]
_SHOWN = {"month": "1-12 or jan-dec", "day of week": "0-6 or sun-sat (0 is Sunday)"}


def _group(alternatives: list[str]) -> str:
    return alternatives[0] if len(alternatives) == 1 else f"(?:{'|'.join(alternatives)})"


def _digits(a: int, b: int) -> str:
    return str(a) if a == b else f"[{a}-{b}]"


def _numbers(lo: int, hi: int) -> str:
    """The decimals lo..hi (at most two digits), without leading zeros."""
    out = [_digits(lo, min(hi, 9))] if lo <= 9 else []
    n = max(lo, 10)
    while n <= hi:
        tens = n // 10
        if n % 10 == 0 and hi >= n + 9:
            last = hi // 10 if hi % 10 == 9 else hi // 10 - 1
            out.append(f"{_digits(tens, last)}[0-9]")
            n = (last + 1) * 10
        else:
            end = min(hi, tens * 10 + 9)
            out.append(f"{tens}{_digits(n % 10, end % 10)}")
            n = end + 1
    return _group(out)


def _values(lo: int, hi: int, names: dict[str, int]) -> str:
    """One value lo..hi: a number with any leading zeros, or a name in any case."""
    spelled = ["".join(f"[{c}{c.upper()}]" for c in name)
               for name, v in names.items() if lo <= v <= hi]
    return _group([f"0*{_numbers(lo, hi)}", *spelled])


def field_pattern(index: int) -> str:
    """A five-field schedule whose field ``index`` is valid (the others anything)."""
    _, lo, hi, names = FIELDS[index]
    starts = [f"{_values(v, v, names)}(?:-{_values(v, hi, names)})?" for v in range(lo, hi + 1)]
    part = f"(?:\\*|\\?|{'|'.join(starts)})(?:{_STEP})?"
    before = f"(?:{_WORD}+{_SPACE}+){{{index}}}" if index else ""
    after = f"(?:{_SPACE}+{_WORD}+){{{4 - index}}}" if index < 4 else ""
    return f"^{_SPACE}*{before}(?:{part},)*{part}{after}{_SPACE}*$"


def build_rules() -> list[dict[str, str]]:
    """The interval's x-kubernetes-validations, as the CRD holds them."""
    rules = [{"rule": f"self.matches(r'{FIVE_FIELDS}')",
              "message": "interval must be a five-field cron schedule (minute hour day-of-month "
                         "month day-of-week) such as '*/30 * * * *'; durations like 30s or 1m "
                         "are not schedules"}]
    for i, (name, lo, hi, _) in enumerate(FIELDS):
        shown = _SHOWN.get(name, f"{lo}-{hi}")
        rules.append({
            "rule": f"!self.matches(r'{FIVE_FIELDS}') || self.matches(r'{field_pattern(i)}')",
            "message": f"interval's {name} (its {_ORDINAL[i]} field) must be *, ?, {shown}, a "
                       f"range a-b of those with a <= b, or a comma-separated list of these, "
                       f"each optionally followed by /step with a step of 1 or more"})
    return rules


def interval_schema(crd: Path) -> dict[str, Any]:
    obj = yaml.safe_load(crd.read_text())
    spec = obj["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    schema: dict[str, Any] = spec["properties"]["descheduler"]["properties"]["interval"]
    return schema


_TERM = re.compile(r"(!?)self\.matches\(r'([^']*)'\)")


def rule_allows(rule: str, value: str) -> bool:
    """Evaluates a rule of the only shape these are written in: ``self.matches(r'...')`` terms,
    each possibly negated, joined by ``||``."""
    terms = rule.split(" || ")
    verdicts = []
    for term in terms:
        m = _TERM.fullmatch(term)
        assert m, f"not a rule this evaluator reads: {term[:80]}"
        verdicts.append(bool(re.search(m.group(2), value)) != bool(m.group(1)))
    return any(verdicts)


def failing_rules(schema: dict[str, Any], value: str) -> list[int]:
    """Indexes of the interval's rules that refuse ``value``."""
    return [i for i, r in enumerate(schema["x-kubernetes-validations"])
            if not rule_allows(r["rule"], value)]


def schema_allows(schema: dict[str, Any], value: str) -> bool:
    return len(value) <= schema["maxLength"] and not failing_rules(schema, value)


# Schedules to try: mostly near-misses of valid ones, with the values, names, steps and
# separators where a regular expression and the parser could disagree.
_ODD_TOKENS = ["", "+1", "-1", "a", "x1", "1.5", "0x1", "\u0663", "\uff15", "\u00b2", "jan",
               "sun", "JAN", "Mon", "\u017fun", "\u212aan", "january", "*", "?", "L", "#"]
_STEPS = ["1", "2", "15", "30", "0", "00", "", "x", "01", "-1", "+2", "\u0663", "1/2", "60",
          str(MAX_STEP), str(MAX_STEP + 1), "0" * 20 + "7", "9" * 19]
_SEPARATORS = [" "] * 8 + ["  ", "\t", "\n", "\r\n", "\f", "\v", "\u00a0", "\u2003", "\x1c"]


def _token(rng: random.Random, lo: int, hi: int, names: dict[str, int], good: bool) -> str:
    r = rng.random()
    if good or r < 0.55:
        value = rng.randint(lo, hi)
        if names and rng.random() < 0.3:
            name = next(n for n, v in names.items() if v == value)
            return "".join(c.upper() if rng.random() < 0.3 else c for c in name)
        return "0" * rng.choice([0, 0, 0, 1, 2, 5]) + str(value)
    if r < 0.85:
        return str(rng.choice([hi + 1, hi + 2, max(lo - 1, 0), 7, 8, 12, 13, 24, 31, 32, 59,
                               60, 99, 100, 1000]))
    return rng.choice(_ODD_TOKENS)


def _part(rng: random.Random, lo: int, hi: int, names: dict[str, int], good: bool) -> str:
    r = rng.random()
    if r < 0.2:
        text = rng.choice(["*", "*", "?"])
    elif r < 0.55:
        text = _token(rng, lo, hi, names, good)
    elif r < 0.97 or good:
        ends = [_token(rng, lo, hi, names, good) for _ in range(2)]
        if good:  # in order, as cron.py reads them
            ends.sort(key=lambda t: names[t.lower()] if t.lower() in names else int(t))
        text = "-".join(ends)
    else:
        text = rng.choice(["*-5", "5-", "-5", "1-2-3", "?-1", "1--2"])
    if rng.random() < 0.35:
        text += "/" + (rng.choice(["1", "2", "15", "30", "01", "60", str(MAX_STEP)]) if good
                       else rng.choice(_STEPS))
    return text


def random_schedule(rng: random.Random) -> str:
    """A schedule, valid about half the time."""
    r = rng.random()
    if r < 0.05:
        return "".join(rng.choice("0123456789*?/-, \tjanJANsun\u0663\v")
                       for _ in range(rng.randint(0, 24)))
    count = 5 if r < 0.93 else rng.choice([0, 1, 3, 4, 6, 7])
    # Most schedules are valid but for at most one field.
    bad = rng.randrange(count) if count and rng.random() < 0.5 else -1
    fields = []
    for i in range(count):
        _, lo, hi, names = FIELDS[min(i, 4)]
        good = i != bad
        parts = [_part(rng, lo, hi, names, good) for _ in range(rng.choice([1, 1, 1, 2, 3]))]
        if not good and rng.random() < 0.05:
            parts.append(rng.choice(["", ","]))
        fields.append(",".join(parts))
    if fields and rng.random() < 0.03:  # near the length limit
        fields[0] = ",".join([fields[0]] + [str(i % 60) for i in range(rng.randint(100, 200))])
    sep = rng.choice(_SEPARATORS) if bad >= 0 else " "
    out = rng.choice(["", "", "", " ", "\n"])
    for i, f in enumerate(fields):
        out += (rng.choice([sep, " "]) if i else "") + f
    return out + rng.choice(["", "", "", " ", "\n", "\t"])


def sample_schedules(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [random_schedule(rng) for _ in range(count)]


if __name__ == "__main__":
    print(yaml.safe_dump({"maxLength": MAX_LENGTH, "x-kubernetes-validations": build_rules()},
                         sort_keys=False, width=10**6))
