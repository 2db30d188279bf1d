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

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.models.base import table_of
from app.models.fact import MemoryItemVersion

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


async def record(
    db: AsyncSession, item: Any, change: str, actor: Actor, reason: str | None = None
) -> None:
    """Record `item` as it is now as its version `item.version`."""
    await db.execute(insert(V).values(**_values(item, item.version, change, reason, actor)))


async def record_removed(db: AsyncSession, rows: Sequence[Any], actor: Actor, reason: str) -> None:
    """A `delete` version (the item's version + 1) for each removed item (plain rows with
    every column, e.g. a DELETE ... RETURNING)."""
    if not rows:
        return
    now = datetime.now(UTC)
    await db.execute(
        insert(V),
        [
            {**_values(r, int(r.version) + 1, "delete", reason, actor), "changed_at": now}
            for r in rows
        ],
    )


async def versions(db: AsyncSession, tenant_id: uuid.UUID, item_id: uuid.UUID) -> list[Any]:
    rows = await db.execute(
        sa.select(V).where(V.c.tenant_id == tenant_id, V.c.item_id == item_id).order_by(V.c.version)
    )
    return list(rows.all())


async def versions_of(
    db: AsyncSession, tenant_id: uuid.UUID, item_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, list[Any]]:
    """Versions of several items (oldest first), by item."""
    out: dict[uuid.UUID, list[Any]] = {i: [] for i in item_ids}
    if not item_ids:
        return out
    rows = await db.execute(
        sa.select(V)
        .where(V.c.tenant_id == tenant_id, V.c.item_id.in_(list(item_ids)))
        .order_by(V.c.item_id, V.c.version)
    )
    for r in rows.all():
        out[r.item_id].append(r)
    return out
