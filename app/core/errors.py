"""One error type for the whole service and the handlers that render its envelope.

Every error response is `{"error": {"code", "message", "details"}}` with the right status;
nothing below the router raises HTTPException, and no stack trace ever reaches a client.
"""

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.core.request_context import HEADER, SCOPE_KEY

log = logging.getLogger("loom.errors")


class AppError(Exception):
    status_code = 400
    code = "bad_request"

    def __init__(self, message: str, *, code: str | None = None, details: Any = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.details = details
        self.headers = headers


class BadRequest(AppError):
    status_code, code = 400, "bad_request"


class Unauthorized(AppError):
    status_code, code = 401, "unauthorized"


class Forbidden(AppError):
    status_code, code = 403, "forbidden"


class NotFound(AppError):
    status_code, code = 404, "not_found"


class Conflict(AppError):
    status_code, code = 409, "conflict"


class PreconditionFailed(AppError):
    status_code, code = 412, "precondition_failed"


class PayloadTooLarge(AppError):
    status_code, code = 413, "payload_too_large"


class Unprocessable(AppError):
    status_code, code = 422, "validation_error"


class PreconditionRequired(AppError):
    status_code, code = 428, "precondition_required"


class TooManyRequests(AppError):
    status_code, code = 429, "rate_limited"


class ServiceUnavailable(AppError):
    status_code, code = 503, "unavailable"


class InternalError(AppError):
    """Never raised: what `store_error` answers for an exception nothing maps."""

    status_code, code = 500, "internal_error"


class ErrorBody(BaseModel):
    code: str
    message: str
    details: Any = None


class ErrorEnvelope(BaseModel):
    error: ErrorBody


def _responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {c: {"model": ErrorEnvelope} for c in codes}


# Routes declare these so the OpenAPI document shows the envelope.
ERROR_RESPONSES = _responses(400, 401, 403, 404, 409, 413, 422, 429, 503)


def error_response(status: int, code: str, message: str, details: Any = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    body = {"error": {"code": code, "message": message, "details": details}}
    return JSONResponse(body, status_code=status, headers=headers)


def clean_validation_errors(errors: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for e in errors:
        item = {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": e.get("type")}
        out.append(item)
    return out


_STATUS_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                 405: "method_not_allowed", 406: "not_acceptable", 409: "conflict",
                 413: "payload_too_large", 415: "unsupported_media_type", 422: "validation_error",
                 429: "rate_limited", 503: "unavailable"}


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
    from app.core.db_errors import map_db_error

    if _too_many_arguments(exc):
        return Unprocessable("The request holds more values than one database query can "
                             "take; send fewer.", code="too_many_values")
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
            return error_response(400, "invalid_agent_id",
                                  f"{where} is not a valid agent id.", errors)
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
    import sqlalchemy.exc

    for exc_class in (sqlalchemy.exc.SQLAlchemyError, asyncpg.PostgresError,
                      asyncpg.InterfaceError, asyncpg.exceptions.InternalClientError,
                      redis.exceptions.RedisError, UnicodeEncodeError, OSError, TimeoutError):
        app.add_exception_handler(exc_class, _store_error)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        response = await _store_error(request, exc)
        # Starlette answers this one outside every middleware: echo the request's id here
        request_id = request.scope.get(SCOPE_KEY)
        if request_id:
            response.headers[HEADER.decode()] = request_id
        return response
