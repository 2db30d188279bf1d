"""Version rows of memory items: every change by any path (extraction, REST, MCP
and the built-in tools; add, update, invalidate, forget, confirm, edit, delete, promote)
writes one, saying who (the API key and agent, or extraction), when and why. Written in
the transaction of the change; never edited; kept when the item is deleted."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.pg import dumps
from app.models.base import table_of
from app.models.fact import (
    MEMORY_ITEM_VERSION_ROW_COLUMNS,
    MemoryItemVersion,
    MemoryItemVersionRow,
)

V = table_of(MemoryItemVersion)


@dataclass(frozen=True, slots=True)
class Actor:
    """Who made a change: `via` extraction, api, mcp or tool; the key and the agent."""

    via: str
    key_id: uuid.UUID | None = None
    agent_id: str | None = None


def actor_of(caller: Any, via: str = "api") -> Actor:
    """The caller of a request (an `app.auth.caller.Caller`) as an actor."""
    return Actor(via, getattr(caller, "key_id", None), getattr(caller, "agent_id", None))


def _values(
    item: Any, version: int, change: str, reason: str | None, actor: Actor
) -> dict[str, Any]:
    return {
        "tenant_id": item.tenant_id,
        "item_id": item.id,
        "version": version,
        "text": item.text,
        "importance": item.importance,
        "tags": list(item.tags or []),
        "valid_from": item.valid_from,
        "invalid_at": item.invalid_at,
        "superseded_by": item.superseded_by,
        "source_session_id": item.source_session_id,
        "source_seqs": list(item.source_seqs or []),
        "change": change,
        "reason": reason,
        "changed_at": sa.func.now(),
        "fact_key": item.fact_key,
        "stated_at": item.stated_at,
        "sources": list(item.sources or []),
        "actor": actor.via,
        "actor_key_id": actor.key_id,
        "actor_agent_id": actor.agent_id,
    }


# An asyncpg connection is taken beside a session (the facts domain's SQL); knowledge's
# own move to asyncpg replaces the session forms.
_INSERT_SQL = """
INSERT INTO memory_item_versions (tenant_id, item_id, version, text, importance, tags,
    valid_from, invalid_at, superseded_by, source_session_id, source_seqs, change, reason,
    changed_at, fact_key, stated_at, sources, actor, actor_key_id, actor_agent_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, coalesce($14, now()), $15,
    $16, $17, $18, $19, $20)
"""


def _args(
    item: Any, version: int, change: str, reason: str | None, actor: Actor, at: datetime | None
) -> tuple[Any, ...]:
    return (
        item.tenant_id,
        item.id,
        version,
        item.text,
        item.importance,
        list(item.tags or []),
        item.valid_from,
        item.invalid_at,
        item.superseded_by,
        item.source_session_id,
        list(item.source_seqs or []),
        change,
        reason,
        at,
        item.fact_key,
        item.stated_at,
        dumps(list(item.sources or [])),
        actor.via,
        actor.key_id,
        actor.agent_id,
    )


async def record(
    db: AsyncSession | asyncpg.Connection,
    item: Any,
    change: str,
    actor: Actor,
    reason: str | None = None,
) -> None:
    """Record `item` as it is now as its version `item.version`."""
    if isinstance(db, asyncpg.Connection):
        await db.execute(_INSERT_SQL, *_args(item, item.version, change, reason, actor, None))
        return
    await db.execute(insert(V).values(**_values(item, item.version, change, reason, actor)))


async def record_removed(
    db: AsyncSession | asyncpg.Connection, rows: Sequence[Any], actor: Actor, reason: str
) -> None:
    """A `delete` version (the item's version + 1) for each removed item (plain rows with
    every column, e.g. a DELETE ... RETURNING)."""
    if not rows:
        return
    now = datetime.now(UTC)
    if isinstance(db, asyncpg.Connection):
        await db.executemany(
            _INSERT_SQL,
            [_args(r, int(r.version) + 1, "delete", reason, actor, now) for r in rows],
        )
        return
    await db.execute(
        insert(V),
        [
            {**_values(r, int(r.version) + 1, "delete", reason, actor), "changed_at": now}
            for r in rows
        ],
    )


_V_COLUMNS = ", ".join(MEMORY_ITEM_VERSION_ROW_COLUMNS)
_VERSIONS_SQL = f"""
SELECT {_V_COLUMNS} FROM memory_item_versions
WHERE tenant_id = $1 AND item_id = ANY($2::uuid[]) ORDER BY item_id, version
"""


async def versions(
    db: AsyncSession | asyncpg.Connection, tenant_id: uuid.UUID, item_id: uuid.UUID
) -> list[Any]:
    if isinstance(db, asyncpg.Connection):
        found = await db.fetch(_VERSIONS_SQL, tenant_id, [item_id])
        return [MemoryItemVersionRow._make(r) for r in found]
    rows = await db.execute(
        sa.select(V).where(V.c.tenant_id == tenant_id, V.c.item_id == item_id).order_by(V.c.version)
    )
    return list(rows.all())


async def versions_of(
    db: AsyncSession | asyncpg.Connection, tenant_id: uuid.UUID, item_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, list[Any]]:
    """Versions of several items (oldest first), by item."""
    out: dict[uuid.UUID, list[Any]] = {i: [] for i in item_ids}
    if not item_ids:
        return out
    if isinstance(db, asyncpg.Connection):
        for r in await db.fetch(_VERSIONS_SQL, tenant_id, list(item_ids)):
            out[r["item_id"]].append(MemoryItemVersionRow._make(r))
        return out
    rows = await db.execute(
        sa.select(V)
        .where(V.c.tenant_id == tenant_id, V.c.item_id.in_(list(item_ids)))
        .order_by(V.c.item_id, V.c.version)
    )
    for r in rows.all():
        out[r.item_id].append(r)
    return out
