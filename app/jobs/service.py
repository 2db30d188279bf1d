"""Compression job bookkeeping and the one function that enqueues a compression.

Status lives in PostgreSQL (`compression_jobs`, one row per session) so it survives Redis
restarts and is visible in `GET /v1/sessions/{id}/memory`; the queue itself is arq behind
`app.core.queue.enqueue`. Deduplication is arq's: the job id is `compress:{session_id}`,
so at most one compression per session is queued or running.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from app.core.db import Connect
from app.core.queue import enqueue
from app.jobs import metrics, repository
from app.jobs.schemas import CompressionJobPublic

log = logging.getLogger("loom.jobs")

COMPRESS_JOB = "compress_session"


def compress_job_id(session_id: uuid.UUID | str) -> str:
    """The arq job id that deduplicates compressions per session."""
    return f"compress:{session_id}"


async def compression_status(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> CompressionJobPublic | None:
    """The session's latest compression job for the API, or None if it never had one."""
    row = await repository.get(conn, tenant_id, session_id)
    if row is None:
        return None
    return CompressionJobPublic(**row._asdict())


# Records a job as pending: (tenant_id, session_id, job_id, error).
Recorder = Callable[[uuid.UUID, uuid.UUID, str, str | None], Awaitable[None]]


def pool_recorder(connection: Connect) -> Recorder:
    """Record in one autocommitted statement on a pool's connection (`connection`)."""

    async def record(
        tenant_id: uuid.UUID, session_id: uuid.UUID, job_id: str, error: str | None
    ) -> None:
        async with connection() as conn:
            await repository.mark_pending(conn, tenant_id, session_id, job_id, error)

    return record


async def enqueue_compression(
    holder: Any,
    connect: Connect | None,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    trigger: str,
    force: bool = False,
    record: Recorder | None = None,
) -> bool:
    """Record the job as pending, then hand it to the queue. Never raises.

    Returns True when the queue accepted it (or already holds it). With Redis down the
    row stays `pending` with the reason, and the worker's cron pass enqueues it again.
    `holder` is a Queue or a started app (see `app.core.queue.enqueue`); the
    row is written by `record`, else through `connect`.
    """
    if record is None:
        assert connect is not None
        record = pool_recorder(connect)
    job_id = compress_job_id(session_id)
    try:
        await record(tenant_id, session_id, job_id, None)
    except Exception as exc:  # status is best-effort; the enqueue still matters
        log.warning(
            "could not record pending compression of %s: %s", session_id, type(exc).__name__
        )
    ok = await enqueue(holder, COMPRESS_JOB, str(tenant_id), str(session_id), force, _job_id=job_id)
    if ok:
        metrics.JOBS_ENQUEUED.labels(trigger=trigger).inc()
        return True
    try:
        await record(tenant_id, session_id, job_id, "queue unavailable; the cron pass retries")
    except Exception:
        pass
    return False
