"""Databases of the tests' own on the machine's PostgreSQL: created empty, dropped after.

`LOOM_TEST_PG` is the admin DSN (default: the machine's `postgres` database, trust auth)."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg

PG_ADMIN_DSN = os.environ.get("LOOM_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


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
