"""The webhook's exceptions are one tree: every one is defined in webhook.errors, derives from
WebhookError and is drawn in that module's docstring under its parent."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest

import webhook
from webhook import errors


def _defined_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.iter_modules(webhook.__path__):
        module = importlib.import_module(f"webhook.{info.name}")
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, BaseException)
                    and obj.__module__ == module.__name__):
                found[f"{module.__name__}.{name}"] = obj
    return found


def _drawn_parents() -> dict[str, str]:
    """Each class in the docstring's tree with the class it hangs from."""
    assert errors.__doc__ is not None
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in errors.__doc__.splitlines():
        if not line.startswith("    "):
            continue
        drawn = line.lstrip(" │├└─")
        name = drawn.split(" ", 1)[0]
        if not re.fullmatch(r"[A-Z]\w+", name):
            continue
        depth = len(line) - len(drawn)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[name] = stack[-1][1] if stack else ""
        stack.append((depth, name))
    return parents


def test_every_webhook_exception_lives_in_errors() -> None:
    assert {name.rsplit(".", 1)[0] for name in _defined_exceptions()} == {"webhook.errors"}


@pytest.mark.parametrize("cls", [pytest.param(c, id=c.__name__)
                                 for _, c in sorted(_defined_exceptions().items())])
def test_the_docstring_draws_each_class_under_its_parent(cls: type[BaseException]) -> None:
    parents = _drawn_parents()
    assert cls.__name__ in parents
    if cls is errors.WebhookError:
        assert parents[cls.__name__] == ""
    else:
        assert issubclass(cls, errors.WebhookError)
        assert parents[cls.__name__] == cls.__bases__[0].__name__


def test_the_drawing_names_no_class_that_is_not_there() -> None:
    assert set(_drawn_parents()) == {c.__name__ for c in _defined_exceptions().values()}
