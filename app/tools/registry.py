"""Running the built-in tools: the context a handler gets, its errors, and `execute`, which
runs a call against the catalog of the request's app (`app.tools.catalog.ToolCatalog`,
a part of the app's state).

Handlers report failures by raising `ToolError(code, message)` (or any `AppError`, which
is mapped to a code); `execute` turns every failure into a `tool_result` with
`is_error: true`, never an HTTP error. Each call runs in a SAVEPOINT, so a failed tool
leaves nothing half-written and the request transaction stays usable.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from app.core.errors import AppError, envelope
from app.tools.catalog import Handler, ToolCatalog, ToolContext

log = logging.getLogger("loom.tools")


class ToolError(Exception):
    """A tool failure the agent should see: `code` is UPPER_SNAKE (INVALID_PARAMETER...)."""

    def __init__(self, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


ToolHandler = Handler


def parse_args(model: type[BaseModel], args: dict[str, Any]) -> Any:
    """Validate tool input with a pydantic model; INVALID_PARAMETER on failure."""
    try:
        return model.model_validate(args)
    except ValidationError as exc:
        details = [
            {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", ""))} for e in exc.errors()
        ]
        raise ToolError("INVALID_PARAMETER", "The tool input is not valid.", details) from exc


def _app_error_code(exc: AppError) -> str:
    # Bad input of any kind is INVALID_PARAMETER; otherwise the domain's own code,
    # upper-cased (session_not_found -> SESSION_NOT_FOUND, conflict -> CONFLICT).
    if exc.status_code in (400, 422):
        return "INVALID_PARAMETER"
    return str(exc.code or "error").upper()


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """The `tool_result` content (text) and whether it reports an error."""

    content: str
    is_error: bool
    code: str | None = None


def _error(code: str, message: str, details: Any = None) -> ToolOutcome:
    body = envelope(code, message, details)
    return ToolOutcome(json.dumps(body, ensure_ascii=False, default=str), True, code)


async def execute(ctx: ToolContext, name: str, args: Any) -> ToolOutcome:
    """Run tool `name`; every failure becomes an error outcome, never an exception."""
    catalog = ctx.state.parts[ToolCatalog]
    handler = catalog.handler(name)
    if handler is None and not catalog.defines(name):
        return _error(
            "UNKNOWN_TOOL",
            f"There is no tool named {name[:200]!r}.",
            {"available": catalog.names()},
        )
    if handler is None:
        return _error("TOOL_UNAVAILABLE", f"The tool {name!r} is not available on this server.")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return _error("INVALID_PARAMETER", "The tool input must be a JSON object.")
    try:
        async with ctx.db.transaction():  # a savepoint in the route's transaction
            output = await handler(ctx, args)
    except ToolError as exc:
        return _error(exc.code, exc.message, exc.details)
    except AppError as exc:
        details = exc.details if exc.details is not None else {"reason": exc.code}
        return _error(_app_error_code(exc), exc.message, details)
    except Exception as exc:
        from app.core.db_errors import map_db_error

        mapped = map_db_error(exc)
        if mapped is not None and mapped.status_code < 500:
            # A value the store refused (out of range, unstorable characters): bad input.
            return _error("INVALID_PARAMETER", mapped.message, {"reason": mapped.code})
        log.exception("tool %s failed", name)
        return _error("INTERNAL_ERROR", "The tool failed unexpectedly.")
    text = (
        output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, default=str)
    )
    return ToolOutcome(text, False)
