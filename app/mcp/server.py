"""The MCP server: Loom's tools on the SDK's `MCPServer`, every failure a tool result."""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, InputRequiredResult

from app.mcp import conversation, facts, knowledge, shared_memory
from app.mcp.calls import failure_of
from app.mcp.registry import ToolSpec

TOOLS: tuple[ToolSpec, ...] = (
    *conversation.TOOLS,
    *shared_memory.TOOLS,
    *knowledge.TOOLS,
    *facts.TOOLS,
)

INSTRUCTIONS = """Loom Memory keeps your conversations, shared data and knowledge.
- Conversations (sessions): append_messages stores turns; search_memory finds old turns
  across your sessions (or one); recall_conversation reads a range of a session;
  get_context gives a session's ready-to-send context within its token budget.
- Shared memory: key/value JSON in namespaces (agent = private to you, global, and
  workflow/swarm/debate/session shared within a scope_id); use if_version to update
  without overwriting a concurrent change.
- Knowledge: items in task/<id>, project/<id> or global; query them with filters, or build
  a context package that fits a token budget.
Errors are tool results whose text starts with a code (session_not_found, validation_error,
version_conflict...), the same codes as the REST API."""


class LoomMCP(MCPServer[Any]):
    """`MCPServer` whose failed tool calls answer `code: message` with the REST code."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            return failure_of(name, exc)


@contextmanager
def _app_logging() -> Iterator[None]:
    """`MCPServer()` calls `logging.basicConfig` (a root handler at INFO) when the root
    logger has none; logging is the app's to configure (`app.core.logs`), so the root
    holds a handler while the server is built."""
    root = logging.getLogger()
    guard = logging.NullHandler()
    root.addHandler(guard)
    try:
        yield
    finally:
        root.removeHandler(guard)


def build_server(version: str) -> LoomMCP:
    """A server with every Loom tool (one per app: its session manager runs once)."""
    with _app_logging():
        server = LoomMCP(
            "loom-memory", title="Loom Memory", version=version, instructions=INSTRUCTIONS
        )
    for spec in TOOLS:
        server.add_tool(
            spec.fn,
            description=spec.description,
            annotations=spec.annotations,
            structured_output=False,
        )
    return server
