"""User SQL: a user is the set of (live) sessions with one `user_id`, plus their tier of
facts. Every statement names its tenant; each runs on an asyncpg connection (a route's:
`app.auth.deps.DbDep`) and reads plain rows (`UserRow`)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import NamedTuple

import asyncpg


class UserRow(NamedTuple):
    """One user's sessions, summed."""

    user_id: str
    session_count: int
    message_count: int
    first_seen: datetime
    last_activity: datetime


# $1 tenant, $2 agent (None: every agent's sessions); then the statement's own
_SUMMARY = """
SELECT user_id, count(*) AS session_count, coalesce(sum(last_seq), 0) AS message_count,
       min(created_at) AS first_seen, max(updated_at) AS last_activity
FROM sessions
WHERE tenant_id = $1 AND user_id IS NOT NULL AND erasure_id IS NULL
  AND ($2::text IS NULL OR agent_id = $2)
"""
_PAGE = (
    _SUMMARY
    + """  AND ($3::text IS NULL OR user_id > $3)
GROUP BY user_id ORDER BY user_id LIMIT $4
"""
)
_ONE = _SUMMARY + "  AND user_id = $3\nGROUP BY user_id\n"
_FACT_COUNT = """
SELECT count(*) FROM memory_items
WHERE tenant_id = $1 AND scope_kind = 'user' AND scope_id = $2
"""
_SESSION_IDS = """
SELECT id FROM sessions
WHERE tenant_id = $1 AND user_id = $2 AND erasure_id IS NULL
  AND ($3::text IS NULL OR agent_id = $3)
ORDER BY created_at, id
"""


async def list_page(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    *,
    agent_id: str | None,
    after: str | None,
    limit: int,
) -> list[UserRow]:
    """Users by id; `agent_id`: only that agent's sessions (and so only its users)."""
    rows = await conn.fetch(_PAGE, tenant_id, agent_id, after, limit)
    return [UserRow._make(r) for r in rows]


async def summary(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, user_id: str, *, agent_id: str | None
) -> UserRow | None:
    """One user's row (None when they have no live session the filter keeps)."""
    row = await conn.fetchrow(_ONE, tenant_id, agent_id, user_id)
    return None if row is None else UserRow._make(row)


async def fact_count(conn: asyncpg.Connection, tenant_id: uuid.UUID, user_id: str) -> int:
    return int(await conn.fetchval(_FACT_COUNT, tenant_id, user_id) or 0)


async def session_ids(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, user_id: str, *, agent_id: str | None = None
) -> list[uuid.UUID]:
    return [r[0] for r in await conn.fetch(_SESSION_IDS, tenant_id, user_id, agent_id)]
