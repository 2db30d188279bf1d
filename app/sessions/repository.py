"""Session SQL. Every statement names the tenant, and leaves out sessions under erasure
(their tombstone, `erasure_id`, makes them read as deleted: app.erasure).

Every function runs SQL on an asyncpg connection: a route's (`app.auth.deps.DbDep`) or a job's
(`app.core.db.transaction`), inside its transaction. Rows come
back as `SessionRow`, whose select list comes from the table model
(`SESSION_ROW_COLUMNS`); no ORM instance is read or built.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg

from app.core.pg import dumps, positional
from app.models.session import SESSION_ROW_COLUMNS, SessionRow

_COLUMNS = ", ".join(SESSION_ROW_COLUMNS)

_GET = f"""
SELECT {_COLUMNS} FROM sessions
WHERE tenant_id = $1 AND id = $2 AND erasure_id IS NULL
"""
_GET_FOR_UPDATE = _GET + "FOR UPDATE\n"


async def get(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID, *, lock: bool = False
) -> SessionRow | None:
    """The session, or None when the tenant has none by that id (or it is under erasure);
    with `lock`, its row is locked for the transaction."""
    row = await conn.fetchrow(_GET_FOR_UPDATE if lock else _GET, tenant_id, session_id)
    return None if row is None else SessionRow._make(row)


_INSERT = f"""
INSERT INTO sessions (id, tenant_id, agent_id, user_id, config, metadata, created_at,
                      updated_at)
VALUES ($2, $1, $3, $4, $5, $6, $7, $7)
RETURNING {_COLUMNS}
"""


async def insert(
    conn: asyncpg.Connection,
    *,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    agent_id: str,
    user_id: str | None,
    config: dict[str, Any],
    meta: dict[str, Any],
    now: datetime,
) -> SessionRow:
    """Add an active session with no messages yet, created and updated `now`."""
    row = await conn.fetchrow(
        _INSERT, tenant_id, session_id, agent_id, user_id, dumps(config), dumps(meta), now
    )
    assert row is not None  # RETURNING the inserted row
    return SessionRow._make(row)


_UPDATE = f"""
UPDATE sessions SET config = $3, metadata = $4, status = $5, ended_at = $6, updated_at = $7
WHERE tenant_id = $1 AND id = $2 AND erasure_id IS NULL
RETURNING {_COLUMNS}
"""


async def update(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    config: dict[str, Any],
    meta: dict[str, Any],
    status: str,
    ended_at: datetime | None,
    updated_at: datetime,
) -> SessionRow | None:
    """Store a session's config, metadata and status; the row as it now is (its counters
    as the appends left them), or None when it is gone."""
    row = await conn.fetchrow(
        _UPDATE,
        tenant_id,
        session_id,
        dumps(config),
        dumps(meta),
        status,
        ended_at,
        updated_at,
    )
    return None if row is None else SessionRow._make(row)


def _page_sql(by_agent: bool, by_user: bool, after: bool) -> str:
    # one statement per filter combination, each numbering only the parameters it takes
    # (`pg.positional`) and keeping its own plan (index) among the connection's prepared
    # statements
    where = ["tenant_id = :tenant", "erasure_id IS NULL"]
    if by_agent:
        where.append("agent_id = :agent")
    if by_user:
        where.append("user_id = :user")
    if after:
        where.append("(created_at, id) > (:at, :id)")
    return positional(f"""
SELECT {_COLUMNS} FROM sessions
WHERE {" AND ".join(where)}
ORDER BY created_at, id LIMIT :limit
""")[0]


# every filter combination's statement, written once at import
_PAGE_SQL = {
    (a, u, f): _page_sql(a, u, f)
    for a in (False, True)
    for u in (False, True)
    for f in (False, True)
}


async def list_page(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    *,
    agent_id: str | None,
    after: tuple[datetime, uuid.UUID] | None,
    limit: int,
    user_id: str | None = None,
) -> list[SessionRow]:
    """The tenant's sessions oldest first (of one agent, of one user), after the cursor
    `(created_at, id)`."""
    sql = _PAGE_SQL[agent_id is not None, user_id is not None, after is not None]
    args: list[Any] = [tenant_id]
    if agent_id is not None:
        args.append(agent_id)
    if user_id is not None:
        args.append(user_id)
    if after is not None:
        args.extend(after)
    rows = await conn.fetch(sql, *args, limit)
    return [SessionRow._make(r) for r in rows]
