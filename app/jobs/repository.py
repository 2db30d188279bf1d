"""Queries on `compression_jobs` (one row per session). Callers commit."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from app.core.partitions import FAN_OUT
from app.core.pg import positional
from app.models.base import table_of
from app.models.compression_job import CompressionJob
from app.models.memory_state import L1_COUNT_SQL, PRESSURE_SQL

_T = table_of(CompressionJob)

# Error texts are shown to API callers; keep them short.
MAX_ERROR_CHARS = 500


def _clip(error: str | None) -> str | None:
    return None if error is None else error[:MAX_ERROR_CHARS]


async def get(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> CompressionJob | None:
    """The session's job row, or None if it never had a job."""
    result = await db.execute(
        sa.select(CompressionJob).where(
            col(CompressionJob.tenant_id) == tenant_id, col(CompressionJob.session_id) == session_id
        )
    )
    return result.scalar_one_or_none()


# Queued (or waiting for the queue). A running job keeps its `running` status: the queue
# deduplicates per session and the running job re-plans before it ends. The error is kept
# unless a new one is given. One statement for the ORM (`mark_pending`) and the hot paths'
# pool (`mark_pending_pg`: the append's compression trigger, no ORM transaction).
_MARK_PENDING = """
INSERT INTO compression_jobs AS j (session_id, tenant_id, status, job_id, attempts,
                                   enqueued_at, updated_at, last_error)
VALUES (:session_id, :tenant_id, 'pending', :job_id, 0, now(), now(), :error)
ON CONFLICT (tenant_id, session_id) DO UPDATE
SET status = CASE WHEN j.status = 'running' THEN j.status ELSE 'pending' END,
    job_id = excluded.job_id, enqueued_at = clock_timestamp(),
    updated_at = CASE WHEN j.status = 'running' THEN j.updated_at ELSE now() END,
    last_error = CASE WHEN j.status = 'running' THEN j.last_error
                      ELSE coalesce(excluded.last_error, j.last_error) END
"""
_MARK_PENDING_PG = positional(_MARK_PENDING)


async def mark_pending(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    job_id: str,
    error: str | None = None,
) -> None:
    """Queued (or waiting for the queue); see `_MARK_PENDING`. A running job keeps its
    `running` status (the queue deduplicates per session) but the ask is kept in
    `enqueued_at`: the job enqueues itself again once it has ended
    (`app.memory.tasks.requeue_if_asked`)."""
    await db.execute(
        sa.text(_MARK_PENDING),
        {"session_id": session_id, "tenant_id": tenant_id, "job_id": job_id, "error": _clip(error)},
    )


async def mark_pending_pg(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    job_id: str,
    error: str | None = None,
) -> None:
    """`mark_pending` in one autocommitted statement on a connection of the pool."""
    sql, names = _MARK_PENDING_PG
    values = {
        "session_id": session_id,
        "tenant_id": tenant_id,
        "job_id": job_id,
        "error": _clip(error),
    }
    await conn.execute(sql, *[values[n] for n in names])


async def asked_since_start(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID) -> bool:
    """A compression was asked for after the latest try started (and the job is not
    running any more)."""
    row = (
        await db.execute(
            sa.select(_T.c.status, _T.c.enqueued_at, _T.c.started_at).where(
                _T.c.tenant_id == tenant_id, _T.c.session_id == session_id
            )
        )
    ).first()
    if row is None or row.status == "running":
        return False
    if row.status == "pending":
        return True
    return (
        row.enqueued_at is not None
        and row.started_at is not None
        and row.enqueued_at > row.started_at
    )


async def mark_running(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, job_id: str, attempt: int
) -> None:
    """A worker started try number `attempt`."""
    now = sa.func.now()
    stmt = insert(_T).values(
        session_id=session_id,
        tenant_id=tenant_id,
        status="running",
        job_id=job_id,
        attempts=attempt,
        started_at=now,
        enqueued_at=now,
        updated_at=now,
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=[_T.c.tenant_id, _T.c.session_id],
        set_={
            "status": "running",
            "job_id": job_id,
            "attempts": attempt,
            "started_at": now,
            "finished_at": None,
            "updated_at": now,
        },
    )
    await db.execute(stmt)


async def mark_retrying(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, error: str
) -> None:
    """This try failed and the job was rescheduled: back to pending, with the reason."""
    await db.execute(
        sa.update(_T)
        .where(_T.c.tenant_id == tenant_id, _T.c.session_id == session_id)
        .values(status="pending", last_error=_clip(error), updated_at=sa.func.now())
    )


async def mark_finished(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    ok: bool,
    error: str | None,
    summaries: int,
    tokens_saved: int,
) -> None:
    """The job ended: `succeeded` (clears the error) or `failed` (keeps it)."""
    values: dict[str, object] = {
        "status": "succeeded" if ok else "failed",
        "finished_at": sa.func.now(),
        "updated_at": sa.func.now(),
        "runs": _T.c.runs + 1,
        "summaries_written": _T.c.summaries_written + summaries,
        "tokens_saved": _T.c.tokens_saved + tokens_saved,
        "last_error": None if ok else _clip(error),
    }
    await db.execute(
        sa.update(_T)
        .where(_T.c.tenant_id == tenant_id, _T.c.session_id == session_id)
        .values(**values)
    )


async def stale_jobs(
    db: AsyncSession, *, pending_before: datetime, running_before: datetime, limit: int
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """(tenant_id, session_id) of jobs pending since before `pending_before` (their
    enqueue may have been lost while Redis was down) or running since before
    `running_before` (the worker died and Redis lost the job), oldest first.
    Deliberately cross-tenant: only the worker's cron pass calls it."""
    result = await db.execute(
        sa.select(_T.c.tenant_id, _T.c.session_id)
        .prefix_with(FAN_OUT)
        .where(
            ((_T.c.status == "pending") & (_T.c.updated_at < pending_before))
            | ((_T.c.status == "running") & (_T.c.updated_at < running_before))
        )
        .order_by(_T.c.updated_at)
        .limit(limit)
    )
    return [(row[0], row[1]) for row in result]


_PRESSURE = sa.text(f"""
SELECT {PRESSURE_SQL}
FROM sessions s JOIN memory_states m ON m.tenant_id = :tid AND m.session_id = :sid
LEFT JOIN compression_jobs j ON j.tenant_id = :tid AND j.session_id = :sid
WHERE s.tenant_id = :tid AND s.id = :sid
""")


async def pressure(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> dict[str, Any] | None:
    """What decides whether a session is busy, in one query: its config, last seq, L1 start,
    stored non-L1 memory tokens (ROM + Kernel + L2 + promoted), L1 tokens (from the stored
    counters, see `MemoryState.swapped_tokens`), and the status of its compression job (None
    if it never had one)."""
    row = (await db.execute(_PRESSURE, {"sid": session_id, "tid": tenant_id})).mappings().first()
    return dict(row) if row is not None else None


_CANDIDATES = sa.text(f"""
SELECT {FAN_OUT} s.tenant_id, s.id
FROM sessions s
JOIN memory_states m ON m.tenant_id = s.tenant_id AND m.session_id = s.id
LEFT JOIN compression_jobs j ON j.tenant_id = s.tenant_id AND j.session_id = s.id
WHERE (s.updated_at >= :since
       OR {L1_COUNT_SQL} > coalesce((s.config ->> 'l1_max_messages')::int, :default_l1_max))
  AND s.last_seq >= m.l1_start_seq
  AND (j.session_id IS NULL
       OR (j.status IN ('succeeded', 'failed') AND j.finished_at < s.updated_at))
ORDER BY s.updated_at DESC
LIMIT :limit
""")


async def busy_candidates(
    db: AsyncSession, *, since: datetime, default_l1_max: int, limit: int
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Sessions that may need compression: changed since `since`, or with more L1
    messages than their `l1_max_messages`; skipping sessions whose job is queued or
    running, or whose last job finished after their last change. Cross-tenant (cron)."""
    result = await db.execute(
        _CANDIDATES, {"since": since, "default_l1_max": default_l1_max, "limit": limit}
    )
    return [(row[0], row[1]) for row in result]


# A tenant's latest jobs of both kinds with their session's agent, most recently changed
# first; `{where}` adds the filters. Every table names the tenant.
_LIST = """
SELECT kind, session_id, agent_id, status, attempts, last_error, enqueued_at, started_at,
       finished_at, updated_at
FROM (
    SELECT 'compression' AS kind, j.session_id, s.agent_id, j.status, j.attempts,
           j.last_error, j.enqueued_at, j.started_at, j.finished_at, j.updated_at
    FROM compression_jobs j JOIN sessions s ON s.tenant_id = :t AND s.id = j.session_id
    WHERE j.tenant_id = :t
    UNION ALL
    SELECT 'facts', x.session_id, s.agent_id, x.status, x.attempts, x.last_error,
           x.enqueued_at, x.started_at, x.finished_at, x.updated_at
    FROM fact_extractions x JOIN sessions s ON s.tenant_id = :t AND s.id = x.session_id
    WHERE x.tenant_id = :t
) u
WHERE true {where}
ORDER BY updated_at DESC, session_id DESC, kind DESC
LIMIT :limit
"""


async def list_jobs(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    *,
    kind: str | None,
    status: str | None,
    agent_id: str | None,
    after: tuple[datetime, uuid.UUID, str] | None,
    limit: int,
) -> list[Any]:
    """One page of `_LIST`: after the cursor (updated_at, session_id, kind)."""
    where, params = [], {"t": tenant_id, "limit": limit}
    for name, value in (("kind", kind), ("status", status), ("agent_id", agent_id)):
        if value is not None:
            where.append(f"AND {name} = :{name}")
            params[name] = value
    if after is not None:
        where.append("AND (updated_at, session_id, kind) < (:at, :sid, :k)")
        params.update(at=after[0], sid=after[1], k=after[2])
    sql = sa.text(_LIST.format(where=" ".join(where)))
    return list((await db.execute(sql, params)).all())
