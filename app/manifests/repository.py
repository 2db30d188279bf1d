"""SQL of the context manifests (`app.models.context_manifest`), all of it on asyncpg.

The insert runs on the hot paths' asyncpg pool, in the request that built the context and
before its response is sent: a build whose answer a client got has its row committed (a
kill -9 of the API afterwards loses nothing). Reads run on the route's connection, the
sweep on the worker's (in a transaction of its own). Rows are read as `ManifestRow`
(select list from the table model); writes take `NewRow`; no ORM instance is read or
built.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

import asyncpg

from app.core.partitions import FAN_OUT
from app.manifests import record as manifests
from app.models.base import row_columns
from app.models.context_manifest import ContextManifest

# One statement, its own transaction, committed without waiting for the WAL flush
# (`synchronous_commit` off for this transaction only, set in the statement itself): the row
# is committed and visible before the response is sent, so a kill -9 of the API loses
# nothing; only a crash of PostgreSQL itself within `wal_writer_delay` (200 ms) could lose
# the newest rows. Waiting for the flush cost a build more than the row itself (an fsync
# per recorded build).
_INSERT = (
    "WITH async_commit AS (SELECT set_config('synchronous_commit', 'off', true)) "
    "INSERT INTO context_manifests (id, tenant_id, session_id, format, total_tokens, "
    "budget, manifest, created_at) "
    "SELECT $1, $2, $3, $4, $5, $6, $7, $8 FROM async_commit"
)


@dataclass(frozen=True, slots=True)
class ManifestRow:
    """A recorded build as the reads return it: every column but the tenant, the manifest
    in full (`row_of`)."""

    id: uuid.UUID
    session_id: uuid.UUID
    format: str
    total_tokens: int
    budget: int
    created_at: datetime
    manifest: dict[str, Any]


_COLUMNS = ", ".join(row_columns([f.name for f in fields(ManifestRow)], ContextManifest))


# Many rows in one statement (the group write of `app.manifests.service`), the same
# commit without waiting for the flush.
_INSERT_MANY = (
    "WITH async_commit AS (SELECT set_config('synchronous_commit', 'off', true)) "
    "INSERT INTO context_manifests (id, tenant_id, session_id, format, "
    "total_tokens, budget, manifest, created_at) "
    "SELECT r.* FROM async_commit, unnest($1::uuid[], $2::uuid[], $3::uuid[], "
    "$4::text[], $5::int[], $6::int[], $7::json[], $8::timestamptz[]) AS r"
)


@dataclass(frozen=True, slots=True)
class NewRow:
    """A manifest row to insert."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    session_id: uuid.UUID
    format: str
    total_tokens: int
    budget: int
    manifest_json: str
    created_at: datetime


async def insert(conn: asyncpg.Connection, row: NewRow) -> None:
    """One row, committed on return (a single statement outside a transaction)."""
    await conn.execute(
        _INSERT,
        row.id,
        row.tenant_id,
        row.session_id,
        row.format,
        row.total_tokens,
        row.budget,
        row.manifest_json,
        row.created_at,
    )


async def insert_many(conn: asyncpg.Connection, rows: list[NewRow]) -> None:
    """Rows in one statement, all committed on return or none (a session deleted in the
    meantime fails the statement: insert those rows one by one)."""
    await conn.execute(
        _INSERT_MANY,
        [r.id for r in rows],
        [r.tenant_id for r in rows],
        [r.session_id for r in rows],
        [r.format for r in rows],
        [r.total_tokens for r in rows],
        [r.budget for r in rows],
        [r.manifest_json for r in rows],
        [r.created_at for r in rows],
    )


def row_of(r: Any) -> ManifestRow:
    """A row with its manifest in full (stored compact: `app.manifests.record.record`);
    `r`: the stored row, its columns as attributes."""
    manifest = manifests.expand(
        r.manifest,
        context_id=str(r.id),
        session_id=str(r.session_id),
        created_at=r.created_at,
        fmt=r.format,
        budget=r.budget,
        total_tokens=r.total_tokens,
    )
    return ManifestRow(
        r.id, r.session_id, r.format, r.total_tokens, r.budget, r.created_at, manifest
    )


def _read(r: asyncpg.Record) -> ManifestRow:
    return row_of(ManifestRow(*r))  # as stored (`_COLUMNS`), then in full


_GET = f"""
SELECT {_COLUMNS} FROM context_manifests
WHERE tenant_id = $1 AND session_id = $2 AND id = $3
"""


async def get(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID, context_id: uuid.UUID
) -> ManifestRow | None:
    r = await conn.fetchrow(_GET, tenant_id, session_id, context_id)
    return _read(r) if r is not None else None


_PAGE = f"""
SELECT {_COLUMNS} FROM context_manifests
WHERE tenant_id = $1 AND session_id = $2{{before}}
ORDER BY created_at DESC, id DESC
LIMIT {{limit}}
"""
_PAGE_FIRST = _PAGE.format(before="", limit="$3")
_PAGE_BEFORE = _PAGE.format(before=" AND (created_at, id) < ($3, $4)", limit="$5")


async def page(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    before: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> list[ManifestRow]:
    """A session's recorded builds, newest first, older than `before` (created_at, id)."""
    if before is None:
        rows = await conn.fetch(_PAGE_FIRST, tenant_id, session_id, limit)
    else:
        rows = await conn.fetch(_PAGE_BEFORE, tenant_id, session_id, *before, limit)
    return [_read(r) for r in rows]


# The sweep: across tenants on purpose (FAN_OUT), bounded per pass.
_SWEEP_OLD = f"""
WITH gone AS (
  DELETE {FAN_OUT} FROM context_manifests m
  USING (SELECT tenant_id, id FROM context_manifests WHERE created_at < $1
         ORDER BY created_at LIMIT $2) d
  WHERE m.tenant_id = d.tenant_id AND m.id = d.id RETURNING 1)
SELECT count(*) FROM gone
"""
_SWEEP_EXTRA = f"""
WITH gone AS (
  DELETE {FAN_OUT} FROM context_manifests m
  USING (SELECT tenant_id, id FROM (
           SELECT tenant_id, id, row_number() OVER (
             PARTITION BY tenant_id, session_id ORDER BY created_at DESC, id DESC) AS n
           FROM context_manifests) x
         WHERE x.n > $1 LIMIT $2) d
  WHERE m.tenant_id = d.tenant_id AND m.id = d.id RETURNING 1)
SELECT count(*) FROM gone
"""


async def sweep(
    conn: asyncpg.Connection, *, keep: int, older_than: datetime | None, batch: int
) -> dict[str, int]:
    """Delete rows past the age limit and past the newest `keep` of their session (0: no
    count limit); at most `batch` of each kind, in the session's transaction. Counts per
    kind."""
    aged = extra = 0
    if older_than is not None:
        aged = await conn.fetchval(_SWEEP_OLD, older_than, batch)
    if keep > 0:
        extra = await conn.fetchval(_SWEEP_EXTRA, keep, batch)
    return {"expired": int(aged or 0), "over_keep": int(extra or 0)}
