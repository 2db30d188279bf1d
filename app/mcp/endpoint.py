"""The ASGI app at `/mcp`: the caller is resolved exactly as for REST, then the SDK's
Streamable HTTP session manager (stateless, JSON responses) answers."""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from app.auth.deps import get_caller
from app.core.errors import ServiceUnavailable
from app.mcp.scope_keys import CALLER_SCOPE_KEY

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

PATH = "/mcp"


class McpEndpoint:
    """Authenticates each request (401/403/429... as REST, with the error envelope, before
    the MCP layer), keeps the caller in the ASGI scope for the tools, and hands the
    request to the session manager.

    The MCP SDK and the server are loaded and started by the first request to `/mcp`, not
    when the process starts: they cost an API process about a second and 60 MiB to import,
    and most deployments never call them. `running()` (the app's lifespan) allows them to
    start while inside, and stops them, if they started, when it ends."""

    def __init__(self, version: str, max_body_bytes: int) -> None:
        self.version = version
        self.max_body_bytes = max_body_bytes
        self._manager: StreamableHTTPSessionManager | None = None
        self._serving = False
        self._starting = asyncio.Lock()
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def build(cls, version: str, max_body_bytes: int) -> "McpEndpoint":
        return cls(version, max_body_bytes)

    def route(self) -> Route:
        """POST only: a stateless server has no stream for GET, which the spec lets it
        answer with 405 (as the app answers any other method)."""
        return Route(PATH, self, methods=["POST"], name="mcp", include_in_schema=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        # raises the REST errors, which the app's handlers render as the envelope
        scope[CALLER_SCOPE_KEY] = await get_caller(request)
        manager = self._manager or await self._start()
        await manager.handle_request(scope, receive, send)

    async def _start(self) -> "StreamableHTTPSessionManager":
        """The session manager, started once (by the first request that needs it). Its
        task group lives in a task of its own, so the lifespan may be entered and left by
        different tasks."""
        async with self._starting:
            if self._manager is not None:
                return self._manager
            if not self._serving:
                raise ServiceUnavailable("The MCP endpoint is not running.")
            from mcp.server.transport_security import TransportSecuritySettings

            from app.mcp.server import build_server

            server = build_server(self.version)
            server.streamable_http_app(
                stateless_http=True,
                json_response=True,
                # A bearer key is required, which a DNS-rebinding page cannot know; the
                # Host/Origin checks (for endpoints trusting localhost or cookies) would
                # only refuse proxies' host names.
                transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
                max_request_body_size=self.max_body_bytes,
            )
            manager = server.session_manager
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
            self._manager, self._stop, self._task = manager, stop, task
            return manager

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve while inside (the app's lifespan); what started stops at the end."""
        self._serving = True
        try:
            yield
        finally:
            self._serving = False
            self._manager = None
            stop, task, self._stop, self._task = self._stop, self._task, None, None
            if stop is not None and task is not None:
                stop.set()
                await task
