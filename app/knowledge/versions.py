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

from app.core import pg
from app.models.fact import MEMORY_ITEM_VERSION_ROW_COLUMNS, MemoryItemVersionRow


@dataclass(frozen=True, slots=True)
class Actor:
    """Who made a change: `via` extraction, api, mcp or tool; the key and the agent."""

    via: str
    key_id: uuid.UUID | None = None
    agent_id: str | None = None


def actor_of(caller: Any, via: str = "api") -> Actor:
    """The caller of a request (an `app.auth.caller.Caller`) as an actor."""
    return Actor(via, getattr(caller, "key_id", None), getattr(caller, "agent_id", None))


# every column but `changed_at` is a parameter; `changed_at`: the given time, else the
# transaction's (now())
_FIELDS = tuple(c for c in MEMORY_ITEM_VERSION_ROW_COLUMNS if c != "changed_at")
_INSERT = f"""
INSERT INTO memory_item_versions ({", ".join(_FIELDS)}, changed_at)
VALUES ({", ".join(f"${i + 1}" for i in range(len(_FIELDS)))},
        coalesce(${len(_FIELDS) + 1}::timestamptz, now()))
"""


def _values(
    item: Any, version: int, change: str, reason: str | None, actor: Actor, at: datetime | None
) -> tuple[Any, ...]:
    """The parameters of `_INSERT` for `item` (an item row, or a fact being written)."""
    values = {
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
        "fact_key": item.fact_key,
        "stated_at": item.stated_at,
        "sources": pg.dumps(list(item.sources or [])),
        "actor": actor.via,
        "actor_key_id": actor.key_id,
        "actor_agent_id": actor.agent_id,
    }
    return (*(values[f] for f in _FIELDS), at)


async def record(
    conn: asyncpg.Connection, item: Any, change: str, actor: Actor, reason: str | None = None
) -> None:
    """Record `item` as it is now as its version `item.version`."""
    await conn.execute(_INSERT, *_values(item, item.version, change, reason, actor, None))


async def record_removed(
    conn: asyncpg.Connection, rows: Sequence[Any], actor: Actor, reason: str
) -> None:
    """A `delete` version (the item's version + 1) for each removed item (plain rows with
    every column, e.g. a DELETE ... RETURNING)."""
    if not rows:
        return
    now = datetime.now(UTC)
    await conn.executemany(
        _INSERT, [_values(r, int(r.version) + 1, "delete", reason, actor, now) for r in rows]
    )


_COLUMNS = ", ".join(MEMORY_ITEM_VERSION_ROW_COLUMNS)
_VERSIONS = f"""
SELECT {_COLUMNS} FROM memory_item_versions WHERE tenant_id = $1 AND item_id = $2
ORDER BY version
"""


async def versions(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, item_id: uuid.UUID
) -> list[MemoryItemVersionRow]:
    return [MemoryItemVersionRow._make(r) for r in await conn.fetch(_VERSIONS, tenant_id, item_id)]


_VERSIONS_OF = f"""
SELECT {_COLUMNS} FROM memory_item_versions WHERE tenant_id = $1 AND item_id = ANY($2::uuid[])
ORDER BY item_id, version
"""


async def versions_of(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, item_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, list[MemoryItemVersionRow]]:
    """Versions of several items (oldest first), by item."""
    out: dict[uuid.UUID, list[MemoryItemVersionRow]] = {i: [] for i in item_ids}
    if not item_ids:
        return out
    for r in await conn.fetch(_VERSIONS_OF, tenant_id, list(item_ids)):
        row = MemoryItemVersionRow._make(r)
        out[row.item_id].append(row)
    return out
