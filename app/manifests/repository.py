"""SQL of the context manifests (`app.models.context_manifest`).

The insert runs on the hot paths' asyncpg pool, in the request that built the context and
before its response is sent: a build whose answer a client got has its row committed (a
kill -9 of the API afterwards loses nothing). Reads and the sweep are SQLAlchemy Core.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.partitions import FAN_OUT
from app.manifests import record as manifests
from app.models.base import table_of
from app.models.context_manifest import ContextManifest

_T = table_of(ContextManifest)

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
    id: uuid.UUID
    session_id: uuid.UUID
    format: str
    total_tokens: int
    budget: int
    created_at: datetime
    manifest: dict[str, Any]


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
    """A row with its manifest in full (stored compact: `app.manifests.record.record`)."""
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


async def get(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, context_id: uuid.UUID
) -> ManifestRow | None:
    r = (
        await db.execute(
            sa.select(_T).where(
                _T.c.tenant_id == tenant_id, _T.c.session_id == session_id, _T.c.id == context_id
            )
        )
    ).first()
    return row_of(r) if r is not None else None


async def page(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    before: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> list[ManifestRow]:
    """A session's recorded builds, newest first, older than `before` (created_at, id)."""
    q = sa.select(_T).where(_T.c.tenant_id == tenant_id, _T.c.session_id == session_id)
    if before is not None:
        q = q.where(
            sa.tuple_(_T.c.created_at, _T.c.id)
            < sa.tuple_(
                sa.literal(before[0], sa.DateTime(timezone=True)), sa.literal(before[1], sa.Uuid)
            )
        )
    q = q.order_by(_T.c.created_at.desc(), _T.c.id.desc()).limit(limit)
    return [row_of(r) for r in (await db.execute(q)).all()]


async def count(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID) -> int:
    return int(
        await db.scalar(
            sa.select(sa.func.count())
            .select_from(_T)
            .where(_T.c.tenant_id == tenant_id, _T.c.session_id == session_id)
        )
        or 0
    )


# The sweep: across tenants on purpose (FAN_OUT), bounded per pass.
_SWEEP_OLD = sa.text(f"""
WITH gone AS (
  DELETE {FAN_OUT} FROM context_manifests m
  USING (SELECT tenant_id, id FROM context_manifests WHERE created_at < :cutoff
         ORDER BY created_at LIMIT :batch) d
  WHERE m.tenant_id = d.tenant_id AND m.id = d.id RETURNING 1)
SELECT count(*) FROM gone
""")
_SWEEP_EXTRA = sa.text(f"""
WITH gone AS (
  DELETE {FAN_OUT} FROM context_manifests m
  USING (SELECT tenant_id, id FROM (
           SELECT tenant_id, id, row_number() OVER (
             PARTITION BY tenant_id, session_id ORDER BY created_at DESC, id DESC) AS n
           FROM context_manifests) x
         WHERE x.n > :keep LIMIT :batch) d
  WHERE m.tenant_id = d.tenant_id AND m.id = d.id RETURNING 1)
SELECT count(*) FROM gone
""")


async def sweep(
    db: AsyncSession, *, keep: int, older_than: datetime | None, batch: int
) -> dict[str, int]:
    """Delete rows past the age limit and past the newest `keep` of their session (0: no
    count limit); at most `batch` of each kind. Counts per kind."""
    aged = extra = 0
    if older_than is not None:
        aged = await db.scalar(_SWEEP_OLD, {"cutoff": older_than, "batch": batch})
    if keep > 0:
        extra = await db.scalar(_SWEEP_EXTRA, {"keep": keep, "batch": batch})
    return {"expired": int(aged or 0), "over_keep": int(extra or 0)}
