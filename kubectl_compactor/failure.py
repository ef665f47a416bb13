"""Why the command could not make its plan, said in one line per problem (exit code 2)."""

from __future__ import annotations


class Failure(Exception):
    """Why no plan was made: one line per problem."""

    def __init__(self, *lines: str) -> None:
        self.lines = lines
        super().__init__("; ".join(lines))
