"""Maps store failures to the right status: outages to 503, unstorable values to 422,
so neither ever shows as a 500."""

import asyncio
import socket

from app.core.errors import AppError, ServiceUnavailable, Unprocessable


def map_db_error(exc: BaseException) -> AppError | None:
    """Return the error to answer with for a store failure, or None if it is not one."""
    import asyncpg
    import redis.exceptions
    import sqlalchemy.exc

    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, UnicodeEncodeError) or isinstance(
                cur, (asyncpg.exceptions.UntranslatableCharacterError,
                      asyncpg.exceptions.CharacterNotInRepertoireError)) or (
                isinstance(cur, asyncpg.exceptions.DataError)
                and any(m in str(cur).lower() for m in ("unicode", "0x00", "surrogate"))):
            return Unprocessable("The request holds characters that cannot be stored "
                                 "(NUL characters or unpaired surrogates).",
                                 code="unsupported_characters")
        if isinstance(cur, asyncpg.exceptions.DataError):
            return Unprocessable("A value in the request cannot be stored: "
                                 f"{type(cur).__name__}.", code="unstorable_value")
        if isinstance(cur, (ConnectionError, socket.gaierror, asyncio.TimeoutError, TimeoutError,
                            OSError, asyncpg.exceptions.CannotConnectNowError,
                            asyncpg.exceptions.ConnectionDoesNotExistError,
                            asyncpg.exceptions.TooManyConnectionsError,
                            asyncpg.exceptions.AdminShutdownError,
                            redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
            return ServiceUnavailable("A backing store is unavailable; try again shortly.")
        if isinstance(cur, sqlalchemy.exc.DBAPIError) and cur.connection_invalidated:
            return ServiceUnavailable("The database is unavailable; try again shortly.")
        cur = cur.__cause__ or cur.__context__
    return None
