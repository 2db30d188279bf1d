"""Typed exceptions for the server's error envelope `{"error": {"code", "message", "details"}}`.

Every non-2xx answer raises a `LoomError` subclass chosen by status; `code` is the server's
stable error code (`entry_not_found`, `version_conflict`, `validation_error`, ...), which is
what callers should branch on within one status.
"""

from __future__ import annotations

import math
from typing import Any

import httpx


class LoomError(Exception):
    """An error answer of the server (any status without a more specific class)."""

    def __init__(self, message: str, *, status: int, code: str, details: Any = None,
                 headers: httpx.Headers | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.details = details
        self.headers = headers if headers is not None else httpx.Headers()

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(status={self.status!r}, code={self.code!r}, "
                f"message={self.message!r}, details={self.details!r})")


class BadRequest(LoomError):
    """400: a malformed request (invalid key, scope, cursor, ETag...)."""


class Unauthorized(LoomError):
    """401: no key, an unknown key or a revoked one."""


class Forbidden(LoomError):
    """403: the key may not do this (wrong role, another agent's data)."""


class NotFound(LoomError):
    """404: no such session, entry, item, key..., or not visible to this caller."""


class Conflict(LoomError):
    """409: a stale If-Match version, an Idempotency-Key reused with another body, over budget."""


class PreconditionFailed(LoomError):
    """412: If-Match on a missing entry, or If-None-Match `*` on an existing one."""


class PayloadTooLarge(LoomError):
    """413: a message, value or request over the server's limits."""


class ValidationError(LoomError):
    """422: the request body or parameters do not match the schema (`details` lists why)."""


class PreconditionRequired(LoomError):
    """428: the server requires If-Match on shared-memory writes."""


class RateLimited(LoomError):
    """429: too many requests; `retry_after` is the wait the server asked for, in seconds."""

    @property
    def retry_after(self) -> float | None:
        return _retry_after(self.headers)


class ServerError(LoomError):
    """5xx: the server failed (no stack trace ever reaches the client)."""


class Unavailable(ServerError):
    """503: a backing store (PostgreSQL, Redis) is unavailable; retry after `retry_after`."""

    @property
    def retry_after(self) -> float | None:
        return _retry_after(self.headers)


class LoomConnectionError(LoomError):
    """No answer from the server: it could not be reached (refused, unknown host, TLS), the
    connection broke, or the timeout passed. `status` is 0 and `code` says which
    (`connect_error`, `timeout`, `network_error`); `url` is the request's, and the httpx
    exception is the `__cause__`."""

    def __init__(self, message: str, *, code: str, url: str) -> None:
        super().__init__(message, status=0, code=code)
        self.url = url

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def connection_error(exc: httpx.TransportError, url: str) -> LoomConnectionError:
    """The client's error for httpx's failure to get an answer from `url`."""
    if isinstance(exc, httpx.TimeoutException):
        code, what = "timeout", f"no answer from {url} within the timeout"
    elif isinstance(exc, httpx.ConnectError):
        code, what = "connect_error", f"cannot connect to {url}: is the Loom Memory server running?"
    else:
        code, what = "network_error", f"the connection to {url} failed"
    detail = str(exc) or type(exc).__name__
    return LoomConnectionError(f"{what} ({detail})", code=code, url=url)


_BY_STATUS: dict[int, type[LoomError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
    412: PreconditionFailed, 413: PayloadTooLarge, 422: ValidationError,
    428: PreconditionRequired, 429: RateLimited, 503: Unavailable,
}


def _retry_after(headers: httpx.Headers) -> float | None:
    try:
        value = float(headers.get("retry-after", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def error_from_response(response: httpx.Response) -> LoomError:
    """The exception for an error response (its body must have been read)."""
    status = response.status_code
    code, message, details = f"http_{status}", response.reason_phrase or "error", None
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = str(error.get("code") or code)
        message = str(error.get("message") or message)
        details = error.get("details")
    elif response.text:
        message = response.text[:500]
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else LoomError)
    return cls(message, status=status, code=code, details=details, headers=response.headers)
