"""`as_of`: what was true at a time. The SQL side keeps the items true then
(`app.knowledge.repository.valid_at_sql`); this module shows each as it read then: the
version in effect at that time (`app.knowledge.timeline.version_at`) over the item's
current row."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import asyncpg

from app.knowledge import versions
from app.knowledge.timeline import version_at
from app.models.memory_item import MEMORY_ITEM_ROW_COLUMNS

# the fields a version holds; the rest (id, scope, kind, payload, created...) is the item's
_FROM_VERSION = (
    "text",
    "importance",
    "tags",
    "valid_from",
    "source_session_id",
    "source_seqs",
    "fact_key",
    "stated_at",
    "sources",
    "version",
)
_ITEM_FIELDS = MEMORY_ITEM_ROW_COLUMNS  # every column of the item


def as_read_then(item: Any, version: Any | None) -> Any:
    """The item with the fields of `version` (itself when None)."""
    if version is None:
        return item
    values = {f: getattr(item, f, None) for f in _ITEM_FIELDS}
    values.update({f: getattr(version, f) for f in _FROM_VERSION})
    return SimpleNamespace(**values)


async def read_then(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, rows: Sequence[Any], at: datetime
) -> list[Any]:
    """Each row as it read at `at` (rows already filtered to those true then)."""
    found = await versions.versions_of(conn, tenant_id, [r.id for r in rows])
    return [
        as_read_then(r, version_at(found.get(r.id, []), at, created_at=r.created_at)) for r in rows
    ]
