"""Queries on `compression_jobs` (one row per session). Callers commit.

Every statement is SQL on an asyncpg connection: the route's (the job list), the recorder's
(`app.jobs.service`: a session's connection or one of the hot paths' pool), and in the
functions the memory domain's compression job and read reach, whatever handle it holds
(`app.core.pg.Handle`: transitional, until it passes its connection). A job row comes back
as `CompressionJobRow`, whose select list comes from the table model; no ORM instance is
read or built.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal, NamedTuple

import asyncpg

from app.core.partitions import FAN_OUT
from app.core.pg import positional
from app.models.compression_job import COMPRESSION_JOB_ROW_COLUMNS, CompressionJobRow
from app.models.memory_state import L1_COUNT_SQL, PRESSURE_SQL

# Error texts are shown to API callers; keep them short.
MAX_ERROR_CHARS = 500


def _clip(error: str | None) -> str | None:
    return None if error is None else error[:MAX_ERROR_CHARS]


_GET = f"""
SELECT {", ".join(COMPRESSION_JOB_ROW_COLUMNS)} FROM compression_jobs
WHERE tenant_id = $1 AND session_id = $2
"""


async def get(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> CompressionJobRow | None:
    """The session's job row, or None if it never had a job."""
    row = await conn.fetchrow(_GET, tenant_id, session_id)
    return None if row is None else CompressionJobRow._make(row)


# (The upserts' DO UPDATE takes its times from the inserted row, `excluded`: Citus calls no
# function but immutable ones there.)
# Queued (or waiting for the queue). A running job keeps its `running` status: the queue
# deduplicates per session and the running job re-plans before it ends. The error is kept
# unless a new one is given. On a transaction's connection or, autocommitted, on one of the
# hot paths' pool (the append's compression trigger).
_MARK_PENDING = """
INSERT INTO compression_jobs AS j (session_id, tenant_id, status, job_id, attempts,
                                   enqueued_at, updated_at, last_error)
VALUES ($2, $1, 'pending', $3, 0, clock_timestamp(), now(), $4)
ON CONFLICT (tenant_id, session_id) DO UPDATE
SET status = CASE WHEN j.status = 'running' THEN j.status ELSE 'pending' END,
    job_id = excluded.job_id, enqueued_at = excluded.enqueued_at,
    updated_at = CASE WHEN j.status = 'running' THEN j.updated_at ELSE excluded.updated_at END,
    last_error = CASE WHEN j.status = 'running' THEN j.last_error
                      ELSE coalesce(excluded.last_error, j.last_error) END
"""


async def mark_pending(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    job_id: str,
    error: str | None = None,
) -> None:
    """Queued (or waiting for the queue); see `_MARK_PENDING`. A running job keeps its
    `running` status (the queue deduplicates per session) but the ask is kept in
    `enqueued_at`: the job enqueues itself again once it has ended
    (`app.memory.tasks.requeue_if_asked`)."""
    await conn.execute(_MARK_PENDING, tenant_id, session_id, job_id, _clip(error))


_ASKED = """
SELECT status, enqueued_at, started_at FROM compression_jobs
WHERE tenant_id = $1 AND session_id = $2
"""


async def asked_since_start(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> bool:
    """A compression was asked for after the latest try started (and the job is not
    running any more)."""
    row = await conn.fetchrow(_ASKED, tenant_id, session_id)
    if row is None or row["status"] == "running":
        return False
    if row["status"] == "pending":
        return True
    enqueued_at, started_at = row["enqueued_at"], row["started_at"]
    return enqueued_at is not None and started_at is not None and enqueued_at > started_at


_MARK_RUNNING = """
INSERT INTO compression_jobs AS j (session_id, tenant_id, status, job_id, attempts,
                                   started_at, enqueued_at, updated_at)
VALUES ($2, $1, 'running', $3, $4, now(), now(), now())
ON CONFLICT (tenant_id, session_id) DO UPDATE
SET status = 'running', job_id = excluded.job_id, attempts = excluded.attempts,
    started_at = excluded.started_at, finished_at = NULL, updated_at = excluded.updated_at
"""


async def mark_running(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID, job_id: str, attempt: int
) -> None:
    """A worker started try number `attempt`."""
    await conn.execute(_MARK_RUNNING, tenant_id, session_id, job_id, attempt)


_MARK_RETRYING = """
UPDATE compression_jobs SET status = 'pending', last_error = $3, updated_at = now()
WHERE tenant_id = $1 AND session_id = $2
"""


async def mark_retrying(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID, error: str
) -> None:
    """This try failed and the job was rescheduled: back to pending, with the reason."""
    await conn.execute(_MARK_RETRYING, tenant_id, session_id, _clip(error))


_MARK_FINISHED = """
UPDATE compression_jobs
SET status = $3, finished_at = now(), updated_at = now(), runs = runs + 1,
    summaries_written = summaries_written + $4, tokens_saved = tokens_saved + $5,
    last_error = $6
WHERE tenant_id = $1 AND session_id = $2
"""


async def mark_finished(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    ok: bool,
    error: str | None,
    summaries: int,
    tokens_saved: int,
) -> None:
    """The job ended: `succeeded` (clears the error) or `failed` (keeps it)."""
    await conn.execute(
        _MARK_FINISHED,
        tenant_id,
        session_id,
        "succeeded" if ok else "failed",
        summaries,
        tokens_saved,
        None if ok else _clip(error),
    )


_STALE = f"""
SELECT {FAN_OUT} tenant_id, session_id FROM compression_jobs
WHERE (status = 'pending' AND updated_at < $1) OR (status = 'running' AND updated_at < $2)
ORDER BY updated_at
LIMIT $3
"""


async def stale_jobs(
    conn: asyncpg.Connection, *, pending_before: datetime, running_before: datetime, limit: int
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """(tenant_id, session_id) of jobs pending since before `pending_before` (their
    enqueue may have been lost while Redis was down) or running since before
    `running_before` (the worker died and Redis lost the job), oldest first.
    Deliberately cross-tenant: only the worker's cron pass calls it."""
    rows = await conn.fetch(_STALE, pending_before, running_before, limit)
    return [(row[0], row[1]) for row in rows]


_PRESSURE = f"""
SELECT {PRESSURE_SQL}
FROM sessions s JOIN memory_states m ON m.tenant_id = $1 AND m.session_id = $2
LEFT JOIN compression_jobs j ON j.tenant_id = $1 AND j.session_id = $2
WHERE s.tenant_id = $1 AND s.id = $2
"""


async def pressure(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> dict[str, Any] | None:
    """What decides whether a session is busy, in one query: its config, last seq, L1 start,
    stored non-L1 memory tokens (ROM + Kernel + L2 + promoted), L1 tokens (from the stored
    counters, see `MemoryState.swapped_tokens`), and the status of its compression job (None
    if it never had one)."""
    row = await conn.fetchrow(_PRESSURE, tenant_id, session_id)
    return dict(row) if row is not None else None


_CANDIDATES = f"""
SELECT {FAN_OUT} s.tenant_id, s.id
FROM sessions s
JOIN memory_states m ON m.tenant_id = s.tenant_id AND m.session_id = s.id
LEFT JOIN compression_jobs j ON j.tenant_id = s.tenant_id AND j.session_id = s.id
WHERE (s.updated_at >= $1
       OR {L1_COUNT_SQL} > coalesce((s.config ->> 'l1_max_messages')::int, $2))
  AND s.last_seq >= m.l1_start_seq
  AND (j.session_id IS NULL
       OR (j.status IN ('succeeded', 'failed') AND j.finished_at < s.updated_at))
ORDER BY s.updated_at DESC
LIMIT $3
"""


async def busy_candidates(
    conn: asyncpg.Connection, *, since: datetime, default_l1_max: int, limit: int
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Sessions that may need compression: changed since `since`, or with more L1
    messages than their `l1_max_messages`; skipping sessions whose job is queued or
    running, or whose last job finished after their last change. Cross-tenant (cron)."""
    rows = await conn.fetch(_CANDIDATES, since, default_l1_max, limit)
    return [(row[0], row[1]) for row in rows]


class JobListRow(NamedTuple):
    """A session's latest job of one kind as the job list reads it (`list_jobs`): a
    compression job or a fact extraction, with its session's agent."""

    kind: Literal["compression", "facts"]
    session_id: uuid.UUID
    agent_id: str
    status: str
    attempts: int
    last_error: str | None
    enqueued_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime


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
_FILTERS = ("kind", "status", "agent_id")


def _list_sql(kind: bool, status: bool, agent: bool, after: bool) -> tuple[str, list[str]]:
    where = [
        f"AND {name} = :{name}"
        for name, on in zip(_FILTERS, (kind, status, agent), strict=True)
        if on
    ]
    if after:
        where.append("AND (updated_at, session_id, kind) < (:at, :sid, :k)")
    return positional(_LIST.format(where=" ".join(where)))


# every filter combination's statement (and its parameters' names), written once at import
_LIST_SQL = {
    (k, s, a, f): _list_sql(k, s, a, f)
    for k in (False, True)
    for s in (False, True)
    for a in (False, True)
    for f in (False, True)
}


async def list_jobs(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    *,
    kind: str | None,
    status: str | None,
    agent_id: str | None,
    after: tuple[datetime, uuid.UUID, str] | None,
    limit: int,
) -> list[JobListRow]:
    """One page of `_LIST`: after the cursor (updated_at, session_id, kind)."""
    filters = (kind is not None, status is not None, agent_id is not None, after is not None)
    sql, names = _LIST_SQL[filters]
    values: dict[str, Any] = {
        "t": tenant_id,
        "kind": kind,
        "status": status,
        "agent_id": agent_id,
        "limit": limit,
    }
    if after is not None:
        values.update(at=after[0], sid=after[1], k=after[2])
    rows = await conn.fetch(sql, *[values[n] for n in names])
    return [JobListRow._make(r) for r in rows]
