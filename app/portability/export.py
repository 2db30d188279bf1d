"""Streaming export (NDJSON, `app.portability.format`) straight from PostgreSQL.

PostgreSQL renders every line (`to_jsonb` of the row, plus its kind), read through
cursors with a bounded prefetch and sent in chunks: memory stays constant whatever the
size of the subject, and Python only joins text. The whole export reads one snapshot
(a repeatable-read, read-only transaction), so it is consistent even while the subject
keeps talking.

Facts keep their provenance only when it travels with them: a `source_session_id` naming
a session outside the export is written as null (an import elsewhere could not resolve
it).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg

from app.models import metadata
from app.portability import format as fmt

PREFETCH = 5000
CHUNK_BYTES = 256 * 1024


def _columns(table: str) -> str:
    skip = fmt.skipped(table)
    return ", ".join(c.name for c in metadata.tables[table].c if c.name not in skip)


def _lines(kind: str, where: str, order: str, extra: str = "") -> str:
    """One line per row: `row_to_json` (text, in column order: cheaper than jsonb) with the
    kind spliced in front; `extra` (a jsonb to merge) goes through jsonb."""
    table = fmt.TABLE_OF[kind]
    line = (
        f"(jsonb_build_object('t', '{kind}') || to_jsonb(x){extra})::text"
        if extra
        else f'\'{{"t":"{kind}",\' || substr(row_to_json(x)::text, 2)'
    )
    return (
        f"SELECT {line} "
        f"FROM (SELECT {_columns(table)} FROM {table} WHERE {where} ORDER BY {order}) x"
    )


# one session's lines ($1 tenant, $2 session)
SESSION_SQL: tuple[tuple[str, str], ...] = (
    ("session", _lines("session", "tenant_id = $1 AND id = $2 AND erasure_id IS NULL", "id")),
    ("memory_state", _lines("memory_state", "tenant_id = $1 AND session_id = $2", "session_id")),
    ("snapshot", _lines("snapshot", "tenant_id = $1 AND session_id = $2", "created_at, id")),
    ("summary", _lines("summary", "tenant_id = $1 AND session_id = $2", "start_seq")),
    ("message", _lines("message", "tenant_id = $1 AND session_id = $2", "seq")),
    (
        "shared_memory_entry",
        _lines(
            "shared_memory_entry",
            "tenant_id = $1 AND namespace = 'session' AND scope_id = $2::uuid::text",
            "storage_key",
        ),
    ),
    (
        "reference",
        _lines(
            "reference",
            "tenant_id = $1 AND session_id = $2 AND entry_id IN (SELECT e.id FROM "
            "shared_memory_entries e WHERE e.tenant_id = $1 AND e.namespace = 'session' "
            "AND e.scope_id = $2::uuid::text)",
            "seq, entry_id",
        ),
    ),
)

# provenance outside the export is dropped ($2: the exported sessions, or null: any live
# session of the tenant)
_KEEP_SOURCE = (
    " || CASE WHEN x.source_session_id IS NULL OR (CASE WHEN $2::uuid[] IS NULL "
    "THEN EXISTS (SELECT 1 FROM sessions s WHERE s.tenant_id = $1 "
    "AND s.id = x.source_session_id AND s.erasure_id IS NULL) "
    "ELSE x.source_session_id = ANY($2::uuid[]) END) THEN '{}'::jsonb "
    "ELSE '{\"source_session_id\": null}'::jsonb END"
)
# the items of an export ($3: the user whose tier goes along, or null; $4: every item of
# the tenant)
_ITEMS = (
    "tenant_id = $1 AND ($4 OR (scope_kind = 'user' AND scope_id = $3::text) "
    "OR source_session_id = ANY(coalesce($2::uuid[], '{}')))"
)
ITEMS_SQL = _lines("memory_item", _ITEMS, "created_at, id", _KEEP_SOURCE)
VERSIONS_SQL = _lines(
    "memory_item_version",
    f"tenant_id = $1 AND item_id IN (SELECT id FROM memory_items WHERE {_ITEMS})",
    "item_id, version",
    _KEEP_SOURCE,
)
# a tenant export: the shared memory outside session scopes, and its references
TENANT_ENTRIES_SQL = _lines(
    "shared_memory_entry",
    "tenant_id = $1 AND namespace <> 'session'",
    "namespace, scope_id, storage_key",
)
TENANT_REFS_SQL = _lines(
    "reference",
    "tenant_id = $1 AND entry_id IN (SELECT e.id FROM shared_memory_entries e "
    "WHERE e.tenant_id = $1 AND e.namespace <> 'session')",
    "session_id, seq, entry_id",
)
SESSION_PAGE_SQL = (
    "SELECT id FROM sessions WHERE tenant_id = $1 AND erasure_id IS NULL "
    "AND id > $2 ORDER BY id LIMIT 1000"
)


class _Out:
    """Chunks of lines, and the count per kind for the end line."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.counts: dict[str, int] = {}

    def add(self, kind: str, line: str) -> bool:
        self.parts.append(line)
        self.size += len(line) + 1
        self.counts[kind] = self.counts.get(kind, 0) + 1
        return self.size >= CHUNK_BYTES

    def take(self) -> bytes:
        data = ("\n".join(self.parts) + "\n").encode()
        self.parts, self.size = [], 0
        return data


async def _rows(
    conn: asyncpg.Connection, out: _Out, kind: str, sql: str, *args: Any
) -> AsyncIterator[bytes]:
    async for rec in conn.cursor(sql, *args, prefetch=PREFETCH):
        if out.add(kind, rec[0]):
            yield out.take()


async def stream(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    scope: dict[str, Any],
    *,
    sessions: Sequence[uuid.UUID] | None,
    user_id: str | None,
) -> AsyncIterator[bytes]:
    """The export of `sessions` (None: every session of the tenant, with all its knowledge
    and shared memory), with `user_id`'s tier when given. `conn` must be in a transaction."""
    yield (fmt.header_line(scope, datetime.now(UTC).isoformat()) + "\n").encode()
    out = _Out()

    async def one(sid: uuid.UUID) -> AsyncIterator[bytes]:
        for kind, sql in SESSION_SQL:
            async for chunk in _rows(conn, out, kind, sql, tenant_id, sid):
                yield chunk

    if sessions is None:
        last = uuid.UUID(int=0)
        while True:
            page = [r[0] for r in await conn.fetch(SESSION_PAGE_SQL, tenant_id, last)]
            for sid in page:
                async for chunk in one(sid):
                    yield chunk
            if len(page) < 1000:
                break
            last = page[-1]
    else:
        for sid in sessions:
            async for chunk in one(sid):
                yield chunk
    ids = None if sessions is None else list(sessions)
    every = sessions is None
    for kind, sql in (("memory_item", ITEMS_SQL), ("memory_item_version", VERSIONS_SQL)):
        async for chunk in _rows(conn, out, kind, sql, tenant_id, ids, user_id, every):
            yield chunk
    if every:
        for kind, sql in (
            ("shared_memory_entry", TENANT_ENTRIES_SQL),
            ("reference", TENANT_REFS_SQL),
        ):
            async for chunk in _rows(conn, out, kind, sql, tenant_id):
                yield chunk
    counts = dict(out.counts)
    tail = out.take() if out.parts else b""
    yield tail + (fmt.end_line(counts) + "\n").encode()
