"""The built-in tools of an app: definitions served to agents and the handlers that run
them, one catalog per process in its state (`state.parts[ToolCatalog]`).

`app.tools.built_in.catalog()` calls each provider module's `register(catalog)`, which
adds its tools:

    catalog.register_tool(name, definition)    # Anthropic tool definition (name, description,
                                               # input_schema); served by GET .../tools
    catalog.register_handler(name, handler)    # async (ctx: ToolContext, args: dict) -> JSON

`definition` and `handler` may come from different modules (the shared-memory tools are
defined in app/tools/shared_memory_defs.py, executed by app/tools/shared_memory.py).
`app.tools.registry.execute` runs a call against the catalog of the request's app.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
from fastapi import Request

from app.auth.caller import Caller
from app.models.session import SessionRow
from app.state import AppState, app_state


@dataclass(slots=True)
class ToolContext:
    """Everything a handler may need: the request's DB session, the session, the caller."""

    db: asyncpg.Connection
    session: SessionRow
    caller: Caller
    request: Request

    @property
    def state(self) -> AppState:
        """The app's state (settings, redis, shared memory, LLM)."""
        return app_state(self.request.app)


# async (ctx, args) -> JSON-able
Handler = Callable[[ToolContext, dict[str, Any]], Awaitable[Any]]


class ToolCatalog:
    def __init__(self) -> None:
        self._definitions: dict[str, dict[str, Any]] = {}
        self._handlers: dict[str, Handler] = {}

    def register_tool(self, name: str, definition: dict[str, Any]) -> None:
        """Serve `definition` (Anthropic shape; its `name` is forced to `name`)."""
        self._definitions[name] = {**definition, "name": name}

    def register_handler(self, name: str, handler: Handler) -> None:
        """Execute tool `name` with `handler` (last registration wins)."""
        self._handlers[name] = handler

    def remove(self, name: str) -> None:
        """Stop serving and executing tool `name`."""
        self._definitions.pop(name, None)
        self._handlers.pop(name, None)

    def definitions(self) -> list[dict[str, Any]]:
        """All tool definitions, in registration order."""
        return list(self._definitions.values())

    def defines(self, name: str) -> bool:
        return name in self._definitions

    def names(self) -> list[str]:
        return sorted(self._definitions)

    def handler(self, name: str) -> Handler | None:
        return self._handlers.get(name)
