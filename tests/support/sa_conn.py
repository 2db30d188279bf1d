"""The asyncpg connection under a test's own SQLAlchemy session (the `db` fixture), for
calling the app's repositories (which take an asyncpg connection) inside that session's
transaction. The app itself has no SQLAlchemy session: this is the tests' bridge."""

from __future__ import annotations

from typing import Any

import asyncpg


async def driver_connection(db: Any) -> asyncpg.Connection:
    """`db`'s asyncpg connection, in its transaction (begun here when nothing ran yet)."""
    conn = await db.connection()
    raw = await conn.get_raw_connection()
    adapter: Any = raw.dbapi_connection
    if adapter._transaction is None:
        await adapter._start_transaction()
    return raw.driver_connection
