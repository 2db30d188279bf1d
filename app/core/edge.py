"""The app's one ASGI middleware: what every HTTP request goes through before a route, in
this order.

1. Its id (`app.core.request_context`): echoed in `X-Request-Id`, kept for its log lines.
2. Its database deadline (`app.core.deadline`), armed for as long as it runs.
3. Its body (`app.core.limits`): read whole, refused when too large (413) or nested too
   deep (422), then replayed to the app as one message.
4. Its route: a lane (below) when one takes it, else FastAPI's router.
5. Its metrics and access line (`app.core.metrics`), when it is over, whatever happened.

One middleware rather than one per concern: each layer of ASGI wrapping costs every request
a coroutine and a `send` closure, and the three that were here were a tenth of a context
build's CPU.

## Lanes

A lane answers one hot route (the context build, the append) without FastAPI's routing and
parameter solving, which cost those requests more than their own work. It is a shortcut to
the same endpoint, not a second implementation: `Lane.handle` parses what the route's
parameters would (the path's id, the JSON body, into the route's own models), resolves the
caller with the route's own dependency function, and calls the route's endpoint function.

What it may not take it declines (returns None) before doing anything, and the request goes
to the router as if no lane existed: a query string, a body that is not plain JSON of the
expected shape, anything that would be an error. So every error a lane answers comes from
the endpoint or the caller's resolution, and is rendered by the app's exception handlers
(the ones the router's requests get, looked up as Starlette's exception middleware does);
an exception no handler takes goes on to the handler of unexpected errors outside, as from a
route. `tests/core/test_lanes.py` sends the same requests through a lane and through the
router and compares the answers.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any, TypeVar, cast

import orjson
from pydantic import BaseModel, ValidationError
from starlette._exception_handler import _lookup_exception_handler
from starlette.exceptions import HTTPException
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core import deadline, limits, metrics
from app.core.jsonlimits import long_integer_possible
from app.core.logs import REQUEST_ID
from app.core.request_context import HEADER, SCOPE_KEY, request_id

M = TypeVar("M", bound=BaseModel)
# the canonical form of an id in a path (what every client sends; other spellings that the
# router's UUID parameters also accept go to the router)
UUID_PATTERN = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"


@dataclass(frozen=True, slots=True)
class Lane:
    """One hot route: `method` and `path`, the route's template (`{session_id}` stands for
    the one id it has), and `handle(request, id, body)`, which answers or declines (None)."""

    method: str
    path: str
    handle: Callable[[Request, str, bytes], Awaitable[Response | None]]

    def pattern(self) -> re.Pattern[str]:
        before, _, after = self.path.partition("{session_id}")
        return re.compile(re.escape(before) + f"({UUID_PATTERN})" + re.escape(after))


class Edge:
    """See the module's docstring. `max_bytes`: the body limit; `db_seconds`: the database
    deadline (0: none); `access_log`: write an access line per request; `lanes`: the hot
    routes' lanes."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_bytes: int,
        db_seconds: float = 0.0,
        access_log: bool = False,
        lanes: Sequence[Lane] = (),
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.db_seconds = db_seconds
        self.series = metrics.Series(access_log)
        self.lanes = tuple((lane, lane.pattern()) for lane in lanes)
        self._handlers: tuple[dict[Any, Any], dict[int, Any]] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = perf_counter()
        rid = request_id(scope)
        scope[SCOPE_KEY] = rid
        header = (HEADER, rid.encode("ascii"))
        status = 500  # when the app raises before it answers

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        token = REQUEST_ID.set(rid)
        armed = deadline.arm(self.db_seconds)
        route = None
        try:
            route = await self._route(scope, receive, send_with_id)
        finally:
            deadline.disarm(armed)
            self.series.record(scope, route, status, perf_counter() - start)
        # not reset when the app raised: the handler of unexpected errors logs outside this
        # middleware, in the same task, and its line keeps the id
        REQUEST_ID.reset(token)

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> str | None:
        """The request's body, then its lane or the app; the template of the lane's route
        when a lane answered (the router leaves its own in the scope)."""
        body = await limits.read_body(scope, receive, send, self.max_bytes)
        if body is None:
            return None  # refused, or the client went away
        if self.lanes and not scope.get("root_path"):
            method, path = scope["method"], scope["path"]
            for lane, pattern in self.lanes:
                match = pattern.fullmatch(path) if lane.method == method else None
                if match is None:
                    continue
                request = Request(scope, limits.replay(body, receive))
                try:
                    response = await lane.handle(request, match[1], body)
                except Exception as exc:
                    response = await self._rendered(request, exc)
                if response is None:
                    break  # declined: the router answers
                await response(scope, receive, send)
                return lane.path
        await self.app(scope, limits.replay(body, receive), send)
        return None

    async def _rendered(self, request: Request, exc: Exception) -> Response:
        """An error of a lane as the app's handlers render it for the router's requests
        (Starlette's exception middleware's lookup: by status for an HTTP exception, else
        by class); one no handler takes is raised on, to the handler of unexpected errors
        outside every middleware, as from a route."""
        exception_handlers, status_handlers = self._exception_handlers(request.scope)
        handler: Any = None
        if isinstance(exc, HTTPException):
            handler = status_handlers.get(exc.status_code)
        if handler is None:
            handler = _lookup_exception_handler(exception_handlers, exc)
        if handler is None:
            raise exc
        return cast(Response, await handler(request, exc))

    def _exception_handlers(self, scope: Scope) -> tuple[dict[Any, Any], dict[int, Any]]:
        """The app's handlers that the router's requests get (all but the one of unexpected
        errors, which answers outside every middleware), as Starlette's exception
        middleware holds them; read from the app once. (Every handler of the app is a
        coroutine function: `app.core.error_handlers`.)"""
        if self._handlers is None:
            handlers = {
                key: handler
                for key, handler in scope["app"].exception_handlers.items()
                if key not in (500, Exception)
            }
            held = ExceptionMiddleware(self.app, handlers=handlers)
            self._handlers = (held._exception_handlers, held._status_handlers)
        return self._handlers


def json_model(scope: Scope, body: bytes, model: type[M]) -> M | None:
    """A lane's body as the route's `model`, when FastAPI would read and validate it the
    same way (`json_object`); None for anything else, a validation error included (the
    router then words it)."""
    data = json_object(scope, body)
    if data is None:
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


def json_object(scope: Scope, body: bytes) -> dict[str, Any] | None:
    """A lane's body as FastAPI would read it, when it is plainly so: a JSON object sent as
    `application/json` that orjson reads as the standard library, which the router uses,
    does. None for anything else (other media types, other JSON values, what orjson
    refuses, a text that may hold an integer beyond 64 bits, which orjson would read as a
    float: the router then answers as it does)."""
    content_type = None
    for name, value in scope["headers"]:
        if name == b"content-type":
            content_type = value
            break
    if content_type is None or content_type.partition(b";")[0].strip().lower() != (
        b"application/json"
    ):
        return None
    if long_integer_possible(body):
        return None
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return data if type(data) is dict else None
