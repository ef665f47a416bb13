"""A validation problem: where in the object, and what is wrong there."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class InvalidPolicy(ValueError):
    """The policy cannot be used; ``problems`` lists every reason at once."""

    def __init__(self, name: str, problems: list[Problem]) -> None:
        self.name = name
        self.problems = problems
        super().__init__(f"policy {name!r} is invalid: " + "; ".join(map(str, problems)))
