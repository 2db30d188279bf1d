"""What an MCP tool reads from its request, and the results it returns.

`app.mcp.endpoint` stores the resolved `Caller` in the ASGI scope; the SDK hands each tool
the Starlette request of that scope (`ctx.request_context.request`).
"""

import json
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python
from starlette.requests import Request

from app.auth.caller import Caller
from app.core.error_handlers import store_error
from app.core.errors import AppError, clean_validation_errors, envelope
from app.mcp.scope_keys import CALLER_SCOPE_KEY
from app.state import AppState, app_state
from app.tools.registry import ToolError as BuiltinToolError


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call: its HTTP request and the caller that request authenticated as."""

    request: Request
    caller: Caller

    @property
    def state(self) -> AppState:
        return app_state(self.request.app)


def call_of(ctx: Context) -> Call:
    """The request and caller of a tool call (set by `app.mcp.endpoint`)."""
    request = ctx.request_context.request
    if isinstance(request, Request):
        caller = request.scope.get(CALLER_SCOPE_KEY)
        if isinstance(caller, Caller):
            return Call(request, caller)
    # only reachable past the endpoint, which refuses a request it cannot authenticate
    raise RuntimeError("an MCP request without an authenticated caller")


def doc(model: type[BaseModel], field: str) -> str | None:
    """The description of a REST schema field, for the tool parameter that carries it."""
    return model.model_fields[field].description


def ok(data: BaseModel | dict[str, Any]) -> CallToolResult:
    """A tool's result: compact JSON text (what a model reads) and the same data as
    structured content (what a program reads)."""
    plain = (
        data.model_dump(mode="json") if isinstance(data, BaseModel) else to_jsonable_python(data)
    )
    text = json.dumps(plain, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=plain)


def failure(code: str, message: str, details: Any = None) -> CallToolResult:
    """An error result: `code: message` (the REST code), details as a JSON line after it;
    the structured content is the REST error envelope."""
    text = f"{code}: {message}"
    if details is not None:
        text += "\n" + json.dumps(to_jsonable_python(details), ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=to_jsonable_python(envelope(code, message, details)),
        is_error=True,
    )


def failure_of(tool: str, exc: ToolError) -> CallToolResult:
    """The result of a failed call. The SDK raises `ToolError` for an unknown tool, and
    for anything the arguments or the tool raised, as the `__cause__`: that decides."""
    cause = exc.__cause__
    if cause is None:
        return failure("unknown_tool", str(exc))
    if isinstance(cause, ValidationError):
        return failure(
            "validation_error",
            "The tool input is not valid.",
            clean_validation_errors(cause.errors()),
        )
    if isinstance(cause, AppError):
        return failure(cause.code, cause.message, cause.details)
    if isinstance(cause, BuiltinToolError):  # the built-in session tools' own codes
        return failure(cause.code.lower(), cause.message, cause.details)
    err = store_error(cause)  # as REST answers it (and logs it)
    return failure(err.code, err.message)
