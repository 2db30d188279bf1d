"""The handlers that render every error, expected or not, as the envelope
(`app.core.errors.envelope`), and what an exception that is no `AppError` answers."""

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.core.db_errors import map_db_error
from app.core.errors import (
    AppError,
    InternalError,
    Unprocessable,
    clean_validation_errors,
    error_response,
)
from app.core.request_context import HEADER, SCOPE_KEY

log = logging.getLogger("loom.errors")

_STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
    503: "unavailable",
}


def allowed_methods(app: FastAPI, scope: Any) -> list[str]:
    """Every method the routes of this request's path answer, sorted (for `Allow`)."""
    from fastapi.routing import iter_route_contexts
    from starlette._utils import get_route_path

    path = get_route_path(scope)
    methods: set[str] = set()
    for route in iter_route_contexts(app.router.routes):
        regex, route_methods = getattr(route, "path_regex", None), route.methods
        if regex is not None and route_methods and regex.match(path):
            methods |= set(route_methods)
    return sorted(methods)


def _bad_agent_id(error: dict[str, Any]) -> bool:
    """A body, path or query `agent_id` that does not match the agent-id pattern."""
    loc = error["loc"]
    return bool(loc) and loc[-1] == "agent_id" and error["type"] == "string_pattern_mismatch"


def _too_many_arguments(exc: BaseException) -> bool:
    """The driver refused a query for its number of arguments (asyncpg: at most 32,767)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if "number of query arguments cannot exceed" in str(cur):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def store_error(exc: BaseException) -> AppError:
    """What an exception that is no AppError answers (REST and MCP alike): 422 for a query
    over PostgreSQL's parameter limit, the store errors `map_db_error` knows (503s logged
    as warnings), else 500 `internal_error` (logged with its trace)."""
    if _too_many_arguments(exc):
        return Unprocessable(
            "The request holds more values than one database query can take; send fewer.",
            code="too_many_values",
        )
    mapped = map_db_error(exc)
    if mapped is None:
        log.exception("unhandled error", exc_info=exc)
        return InternalError("An internal error occurred.")
    if mapped.status_code >= 500:
        log.warning("store unavailable: %s", type(exc).__name__)
    return mapped


def install_error_handlers(app: FastAPI) -> None:
    """Render every error, expected or not, as the envelope."""

    @app.exception_handler(AppError)
    async def _app_error(_: Request, exc: AppError) -> JSONResponse:
        return error_response(exc.status_code, exc.code, exc.message, exc.details, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = clean_validation_errors(list(exc.errors()))
        if errors and all(_bad_agent_id(e) for e in errors):
            # The same answer as for the X-Agent-Id header (app.auth.caller.check_agent_id).
            where = ".".join(str(p) for p in errors[0]["loc"])
            return error_response(
                400, "invalid_agent_id", f"{where} is not a valid agent id.", errors
            )
        return error_response(422, "validation_error", "The request is not valid.", errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _STATUS_CODES.get(exc.status_code, "error")
        headers = getattr(exc, "headers", None)
        if exc.status_code == 405:
            # Starlette's Allow names only the first route that matched the path; list every
            # method any route of this path answers (GET /items and POST /items are two routes).
            headers = {**(headers or {}), "Allow": ", ".join(allowed_methods(app, request.scope))}
        return error_response(exc.status_code, code, str(exc.detail), None, headers)

    async def _store_error(_: Request, exc: Exception) -> JSONResponse:
        err = store_error(exc)
        return error_response(err.status_code, err.code, err.message, headers=err.headers)

    # Registered per class (not only on Exception) so Starlette answers without re-raising.
    import asyncpg
    import redis.exceptions

    for exc_class in (
        asyncpg.PostgresError,
        asyncpg.InterfaceError,
        asyncpg.exceptions.InternalClientError,
        redis.exceptions.RedisError,
        UnicodeEncodeError,
        OSError,
        TimeoutError,
    ):
        app.add_exception_handler(exc_class, _store_error)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        response = await _store_error(request, exc)
        # Starlette answers this one outside every middleware: echo the request's id here
        request_id = request.scope.get(SCOPE_KEY)
        if request_id:
            response.headers[HEADER.decode()] = request_id
        return response
