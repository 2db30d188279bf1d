"""Agent profile SQL (tenant-filtered), on an asyncpg connection (a route's:
`app.auth.deps.DbDep`). Rows come back as
`ProfileRow`, whose select list comes from the table model."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from app.core.pg import dumps
from app.models.agent_profile import PROFILE_ROW_COLUMNS, ProfileRow

_COLUMNS = ", ".join(PROFILE_ROW_COLUMNS)
_LATEST = f"""
SELECT {_COLUMNS} FROM agent_profiles WHERE tenant_id = $1 AND agent_id = $2
ORDER BY version DESC LIMIT 1
"""
_BY_VERSION = f"""
SELECT {_COLUMNS} FROM agent_profiles WHERE tenant_id = $1 AND agent_id = $2 AND version = $3
"""
# the next version, or nothing when a concurrent publish took it (the unique key)
_PUBLISH = f"""
INSERT INTO agent_profiles (id, tenant_id, agent_id, version, system_prompt, patterns,
                            backend_schema, facts, audit, created_at)
VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8::jsonb, $9, now())
ON CONFLICT (tenant_id, agent_id, version) DO NOTHING
RETURNING {_COLUMNS}
"""


async def latest(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, agent_id: str
) -> ProfileRow | None:
    row = await conn.fetchrow(_LATEST, tenant_id, agent_id)
    return None if row is None else ProfileRow._make(row)


async def by_version(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, agent_id: str, version: int
) -> ProfileRow | None:
    row = await conn.fetchrow(_BY_VERSION, tenant_id, agent_id, version)
    return None if row is None else ProfileRow._make(row)


async def publish(
    conn: asyncpg.Connection,
    *,
    profile_id: uuid.UUID,
    tenant_id: uuid.UUID,
    agent_id: str,
    version: int,
    system_prompt: str,
    patterns: list[Any],
    backend_schema: Any,
    facts: dict[str, Any] | None,
    audit: bool | None,
) -> ProfileRow | None:
    """Store `version`; None when another publish stored that version first."""
    row = await conn.fetchrow(
        _PUBLISH,
        profile_id,
        tenant_id,
        agent_id,
        version,
        system_prompt,
        dumps(patterns),
        None if backend_schema is None else dumps(backend_schema),
        None if facts is None else dumps(facts),
        audit,
    )
    return None if row is None else ProfileRow._make(row)
