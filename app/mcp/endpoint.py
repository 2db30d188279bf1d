"""The ASGI app at `/mcp`: the caller is resolved exactly as for REST, then the SDK's
Streamable HTTP session manager (stateless, JSON responses) answers."""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from app.auth.deps import get_caller
from app.core.errors import ServiceUnavailable
from app.mcp.calls import CALLER_SCOPE_KEY
from app.mcp.server import LoomMCP, build_server

PATH = "/mcp"
# A bearer key is required, which a DNS-rebinding page cannot know; the Host/Origin checks
# (for endpoints trusting localhost or cookies) would only refuse proxies' host names.
_SECURITY = TransportSecuritySettings(enable_dns_rebinding_protection=False)


class McpEndpoint:
    """Authenticates each request (401/403/429... as REST, with the error envelope, before
    the MCP layer), keeps the caller in the ASGI scope for the tools, and hands the
    request to the session manager that `running()` keeps alive."""

    def __init__(self, server: LoomMCP, max_body_bytes: int) -> None:
        self.server = server
        self.max_body_bytes = max_body_bytes
        self._manager: StreamableHTTPSessionManager | None = None

    @classmethod
    def build(cls, version: str, max_body_bytes: int) -> "McpEndpoint":
        return cls(build_server(version), max_body_bytes)

    def route(self) -> Route:
        """POST only: a stateless server has no stream for GET, which the spec lets it
        answer with 405 (as the app answers any other method)."""
        return Route(PATH, self, methods=["POST"], name="mcp", include_in_schema=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        # raises the REST errors, which the app's handlers render as the envelope
        scope[CALLER_SCOPE_KEY] = await get_caller(request)
        manager = self._manager
        if manager is None:
            raise ServiceUnavailable("The MCP endpoint is not running.")
        await manager.handle_request(scope, receive, send)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve while inside (the app's lifespan). The session manager's task group lives
        in a task of its own, so the lifespan may be entered and left by different tasks."""
        self.server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            transport_security=_SECURITY,
            max_request_body_size=self.max_body_bytes,
        )
        manager = self.server.session_manager  # a new one per run: each runs once
        started, stop = asyncio.Event(), asyncio.Event()

        async def host() -> None:
            async with manager.run():
                started.set()
                await stop.wait()

        task = asyncio.create_task(host(), name="mcp-session-manager")
        waiter = asyncio.create_task(started.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if task.done():
            await task  # it failed to start: raise why
        self._manager = manager
        try:
            yield
        finally:
            self._manager = None
            stop.set()
            await task
