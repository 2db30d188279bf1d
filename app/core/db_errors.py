"""Maps store outages to 503 so a down PostgreSQL or Redis never shows as a 500."""

import asyncio
import socket

from app.core.errors import AppError, ServiceUnavailable


def map_db_error(exc: BaseException) -> AppError | None:
    """Return a 503 for connection-level failures of PostgreSQL or Redis, else None."""
    import asyncpg
    import redis.exceptions
    import sqlalchemy.exc

    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
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
