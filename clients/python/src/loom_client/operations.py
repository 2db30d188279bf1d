"""Which REST operation each client method implements (`METHOD /path` as in the OpenAPI
document); the test suite compares the registry with the document."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

Operation = tuple[str, str]


def operation(method: str, path: str) -> Callable[[F], F]:
    """Mark a client method as implementing `method path` (several methods may share one)."""

    def mark(fn: F) -> F:
        fn.__loom_operation__ = (method.upper(), path)  # type: ignore[attr-defined]
        return fn

    return mark


def operations_of(cls: type) -> dict[Operation, list[str]]:
    """(method, path) -> the names of the methods of `cls` that implement it."""
    out: dict[Operation, list[str]] = {}
    for name in sorted(dir(cls)):
        op = getattr(getattr(cls, name, None), "__loom_operation__", None)
        if op is not None:
            out.setdefault(op, []).append(name)
    return out
