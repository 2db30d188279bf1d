"""Request ids (ASGI middleware, the outermost of the app's own) and the access line.

Every HTTP request gets an id: the client's `X-Request-Id` when it is 1-128 visible ASCII
characters, else a new random one. It is echoed in the response's `X-Request-Id` (error
responses included: the handler of unexpected errors, which answers outside every
middleware, reads it from the scope) and kept in `app.core.logs.REQUEST_ID` for every log
line the request causes. With `LOOM_LOG_FORMAT=json` each request also gets an access line
(method, route template, status, duration), written by the request metrics' middleware
(`app.core.metrics`), which resolves the route template anyway.
"""

from __future__ import annotations

import logging
import secrets

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core import deadline
from app.core.logs import REQUEST_ID

HEADER = b"x-request-id"
MAX_LENGTH = 128
# where the id is kept in the ASGI scope (for code that answers outside this middleware)
SCOPE_KEY = "loom.request_id"
_VISIBLE = bytes(range(0x21, 0x7F))

access_log = logging.getLogger("loom.access")


def valid_request_id(value: bytes) -> bool:
    """1-128 visible ASCII characters (no spaces or controls: the id goes into logs)."""
    return 0 < len(value) <= MAX_LENGTH and not value.translate(None, _VISIBLE)


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == HEADER:
            if valid_request_id(value):
                return value.decode("ascii")
            break
    return secrets.token_hex(16)


def log_access(method: str, route: str, status: int, duration: float) -> None:
    """The access line of a request (written by `app.core.metrics`, which has resolved the
    route template: `none` when no route matched); its id is still set."""
    duration_ms = round(duration * 1000, 3)
    access_log.info(
        "%s %s %d %.1fms",
        method,
        route,
        status,
        duration_ms,
        extra={
            "request_id": REQUEST_ID.get(),
            "method": method,
            "route": route,
            "status": status,
            "duration_ms": duration_ms,
        },
    )


class RequestContext:
    """Gives each request its id and arms its database deadline (`app.core.deadline`,
    `db_seconds`; 0: none)."""

    def __init__(self, app: ASGIApp, db_seconds: float = 0.0) -> None:
        self.app = app
        self.db_seconds = db_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        scope[SCOPE_KEY] = request_id
        header = (HEADER, request_id.encode("ascii"))

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        token = REQUEST_ID.set(request_id)
        armed = deadline.arm(self.db_seconds)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            deadline.disarm(armed)
        # not reset when the app raised: the handler of unexpected errors logs outside this
        # middleware, in the same task, and its line keeps the id
        REQUEST_ID.reset(token)
