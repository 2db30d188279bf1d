"""Request ids (given by `app.core.edge`) and the access line.

Every HTTP request gets an id: the client's `X-Request-Id` when it is 1-128 visible ASCII
characters, else a new random one. It is echoed in the response's `X-Request-Id` (error
responses included: the handler of unexpected errors, which answers outside the app's
middleware, reads it from the scope) and kept in `app.core.logs.REQUEST_ID` for every log
line the request causes. With `LOOM_LOG_FORMAT=json` each request also gets an access line
(method, route template, status, duration), written with the request's metrics
(`app.core.metrics`), which resolve the route template anyway. A new id is random but not
secret (it names a request in logs): the process's pseudo-random generator, which Python
reseeds in a forked child, rather than the system's, whose call costs a request ~10 us.
"""

from __future__ import annotations

import logging
import random

from starlette.types import Scope

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


def request_id(scope: Scope) -> str:
    """The client's `X-Request-Id` when it is valid, else a new one (32 hex digits)."""
    for name, value in scope.get("headers", ()):
        if name == HEADER:
            if valid_request_id(value):
                return value.decode("ascii")
            break
    return f"{random.getrandbits(128):032x}"


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
