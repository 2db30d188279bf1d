"""One error type for the whole service and its envelope.

Every error response is `{"error": {"code", "message", "details"}}` (`envelope`) with the
right status; nothing below the router raises HTTPException, and no stack trace ever
reaches a client. The handlers that render it are `app.core.error_handlers`.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel


class AppError(Exception):
    status_code = 400
    code = "bad_request"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        details: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
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


def envelope(code: str, message: str, details: Any = None) -> dict[str, Any]:
    """The error envelope (`ErrorEnvelope`): the one place it is built, for REST answers,
    the HTTP parser's own 400s (`app.core.http_errors`), tool results and MCP results."""
    return {"error": {"code": code, "message": message, "details": details}}


def error_response(
    status: int, code: str, message: str, details: Any = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(envelope(code, message, details), status_code=status, headers=headers)


def clean_validation_errors(errors: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for e in errors:
        item = {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": e.get("type")}
        out.append(item)
    return out
