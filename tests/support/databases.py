"""Databases of the tests' own on the machine's PostgreSQL: created empty, dropped after.

`LOOM_TEST_PG` is the admin DSN (default: the machine's `postgres` database, trust auth);
`LOOM_TEST_REDIS` the Redis URL (default: database 0 of the machine's Redis)."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import asyncpg

PG_ADMIN_DSN = os.environ.get("LOOM_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def _shown(url: str) -> str:
    """`url` without its password (to be printed)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def unreachable_services(redis_url: str, timeout: float = 5.0) -> str | None:
    """One line naming the service the tests cannot reach and the variable that points
    them at another (None when both answer): PostgreSQL at `LOOM_TEST_PG` (a connection as
    its admin), then Redis at `redis_url` (LOOM_TEST_REDIS, a PING)."""
    import redis

    async def pg() -> None:
        conn = await asyncpg.connect(PG_ADMIN_DSN, timeout=timeout)
        await conn.close()

    try:
        asyncio.run(pg())
    except Exception as exc:  # refused, timed out, no such role...: all the same answer
        return (
            f"the tests need PostgreSQL, and {_shown(PG_ADMIN_DSN)} does not answer "
            f"({type(exc).__name__}: {exc}): start it, or set LOOM_TEST_PG to the admin DSN "
            "of one that does"
        )
    client = redis.Redis.from_url(redis_url, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        client.ping()
    except Exception as exc:
        return (
            f"the tests need Redis, and {_shown(redis_url)} does not answer "
            f"({type(exc).__name__}: {exc}): start it, or set LOOM_TEST_REDIS to the URL "
            "of one that does"
        )
    finally:
        client.close()
    return None


async def admin(sql: str) -> None:
    """Run one statement as the admin (CREATE / DROP DATABASE)."""
    conn = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def dsn_of(name: str) -> str:
    """The libpq DSN of database `name` on the admin's server."""
    return f"{PG_ADMIN_DSN.rsplit('/', 1)[0]}/{name}"


def url_of(name: str) -> str:
    """The SQLAlchemy (asyncpg) URL of database `name`."""
    return dsn_of(name).replace("postgresql://", "postgresql+asyncpg://", 1)


@contextmanager
def fresh_database(prefix: str) -> Iterator[str]:
    """A new, empty database named `<prefix>_<pid>_<random>`; yields its name and drops it
    afterwards (its open connections cut)."""
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(3)}"
    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    try:
        yield name
    finally:
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
