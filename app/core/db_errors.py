"""Maps store failures to the right status: outages to 503, unstorable values to 422,
so neither ever shows as a 500.

A *connection-level* database failure (the server closed, reset or terminated the
connection, a failover, a frozen server that does not answer within the statement
timeout) is `is_connection_error`: the broken connection is discarded (`app.core.db`
invalidates it, so it never goes back to the pool) and the request answers 503
`database_unavailable` with `Retry-After`. A statement cancelled by the server's
`statement_timeout` and an exhausted pool are 503 as well, but the connection stays.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

from app.core.errors import AppError, Conflict, NotFound, ServiceUnavailable, Unprocessable

# seconds a client should wait before retrying after a 503 for a store outage
RETRY_AFTER_SECONDS = 2


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, its causes/contexts and SQLAlchemy's wrapped driver error."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        cur = todo.pop()
        if id(cur) in seen:
            continue
        seen.add(id(cur))
        yield cur
        for nxt in (getattr(cur, "orig", None), cur.__cause__, cur.__context__):
            if isinstance(nxt, BaseException):
                todo.append(nxt)


def _is_redis(exc: BaseException) -> bool:
    import redis.exceptions

    return any(isinstance(e, redis.exceptions.RedisError) for e in _chain(exc))


def is_connection_error(exc: BaseException) -> bool:
    """True when `exc` means the database connection it came from is unusable: closed,
    reset, terminated by an administrator or a shutdown, a failed connect, or a command
    that timed out on the client (the server is not answering)."""
    import asyncpg

    if _is_redis(exc):
        return False
    for cur in _chain(exc):
        if isinstance(
            cur,
            (
                asyncpg.exceptions.PostgresConnectionError,  # SQLSTATE class 08
                asyncpg.exceptions.AdminShutdownError,  # 57P01 (terminated)
                asyncpg.exceptions.CrashShutdownError,  # 57P02
                asyncpg.exceptions.CannotConnectNowError,  # 57P03
                asyncpg.exceptions.IdleSessionTimeoutError,
            ),
        ):  # 57P05
            return True
        # a connection left mid-operation by a failure ("another operation is in
        # progress") or already closed; asyncpg's InterfaceError subclass for bad query
        # arguments is also a ValueError and is not one of these
        if isinstance(
            cur, (asyncpg.exceptions.InterfaceError, asyncpg.exceptions.InternalClientError)
        ) and not isinstance(cur, ValueError):
            text = str(cur).lower()
            if "closed" in text or "another operation" in text:
                return True
        if isinstance(
            cur, (ConnectionError, socket.gaierror, asyncio.TimeoutError, TimeoutError, OSError)
        ):
            return True
    return False


def database_unavailable(
    message: str = "The database is unavailable; try again shortly.",
) -> ServiceUnavailable:
    return ServiceUnavailable(
        message, code="database_unavailable", headers={"Retry-After": str(RETRY_AFTER_SECONDS)}
    )


def map_db_error(exc: BaseException) -> AppError | None:
    """Return the error to answer with for a store failure, or None if it is not one."""
    import asyncpg
    import redis.exceptions

    for cur in _chain(exc):
        # the erasure guards of migration 0016 (app.erasure): a write for an erased subject
        state = getattr(cur, "sqlstate", None)
        if state == "LM404":
            return NotFound("No such session.", code="session_not_found")
        if state == "LM409":
            return Conflict(
                "This subject is being erased; try again when the erasure has completed.",
                code="erasure_in_progress",
            )
    for cur in _chain(exc):
        if (
            isinstance(cur, UnicodeEncodeError)
            or isinstance(
                cur,
                (
                    asyncpg.exceptions.UntranslatableCharacterError,
                    asyncpg.exceptions.CharacterNotInRepertoireError,
                ),
            )
            or (
                isinstance(cur, asyncpg.exceptions.DataError)
                and any(m in str(cur).lower() for m in ("unicode", "0x00", "surrogate"))
            )
        ):
            return Unprocessable(
                "The request holds characters that cannot be stored "
                "(NUL characters or unpaired surrogates).",
                code="unsupported_characters",
            )
        if isinstance(cur, asyncpg.exceptions.DataError):
            return Unprocessable(
                f"A value in the request cannot be stored: {type(cur).__name__}.",
                code="unstorable_value",
            )
    if _is_redis(exc) and any(
        isinstance(e, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError))
        for e in _chain(exc)
    ):
        return ServiceUnavailable(
            "A backing store is unavailable; try again shortly.",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    if is_connection_error(exc):
        return database_unavailable()
    for cur in _chain(exc):
        if isinstance(cur, asyncpg.exceptions.QueryCanceledError):  # statement_timeout
            return database_unavailable("The database did not answer in time; try again shortly.")
        if isinstance(cur, asyncpg.exceptions.TooManyConnectionsError):
            return database_unavailable("The database is busy; try again shortly.")
        if _shard_moved(cur):
            return database_unavailable("The data moved; try again shortly.")
    return None


# Citus (docs/scaling.md, Step 4): a statement planned against a shard that a split
# (`isolate_tenant_to_new_shard`) dropped meanwhile fails with an internal error naming
# the shard; the same request planned again finds the new one
_SHARD_GONE = ("could not find valid entry for shard",)


def _shard_moved(exc: BaseException) -> bool:
    import asyncpg

    return isinstance(exc, asyncpg.exceptions.InternalServerError) and any(
        m in str(exc) for m in _SHARD_GONE
    )
