"""The built-in tools of an app: definitions served to agents and the handlers that run
them, one catalog per process in its state (`state.parts[ToolCatalog]`).

`ToolCatalog.built_in()` imports each module of `PROVIDER_MODULES` and calls its
`register(catalog)`, which adds its tools:

    catalog.register_tool(name, definition)    # Anthropic tool definition (name, description,
                                               # input_schema); served by GET .../tools
    catalog.register_handler(name, handler)    # async (ctx: ToolContext, args: dict) -> JSON

`definition` and `handler` may come from different modules (the shared-memory tools are
defined in app/tools/shared_memory_defs.py, executed by app/tools/shared_memory.py).
`app.tools.registry.execute` runs a call against the catalog of the request's app.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("loom.tools")

PROVIDER_MODULES = (
    "app.tools.conversation",
    "app.tools.shared_memory_defs",
    "app.tools.shared_memory",
    "app.tools.facts",
)

# async (ctx: app.tools.registry.ToolContext, args) -> JSON-able
Handler = Callable[[Any, dict[str, Any]], Awaitable[Any]]


class ToolCatalog:
    def __init__(self) -> None:
        self._definitions: dict[str, dict[str, Any]] = {}
        self._handlers: dict[str, Handler] = {}

    @classmethod
    def built_in(cls) -> ToolCatalog:
        """The catalog of every provider module that is installed."""
        catalog = cls()
        for module in PROVIDER_MODULES:
            try:
                provider = importlib.import_module(module)
            except ModuleNotFoundError as exc:
                # Only a missing provider module is expected (not yet built); anything else
                # is a real bug and must surface.
                if exc.name != module:
                    raise
                log.info("tool provider %s not installed", module)
                continue
            provider.register(catalog)
        return catalog

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
