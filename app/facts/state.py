"""SQL of a session's fact extraction (apart from the facts store's statements,
`app.facts.repository`): its state row (watermark, job status, usage, failed ranges, the
claim that lets one run at a time read a batch), the session and the messages of a batch.
Every statement names `tenant_id`; callers commit."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.partitions import FAN_OUT
from app.models.base import table_of
from app.models.fact import FactExtraction

X = table_of(FactExtraction)
MAX_ERROR_CHARS = 500


def _clip(error: str | None) -> str | None:
    return None if error is None else error[:MAX_ERROR_CHARS]


async def get_state(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, *, for_update: bool = False
) -> FactExtraction | None:
    q = sa.select(FactExtraction).where(X.c.tenant_id == tenant_id, X.c.session_id == session_id)
    if for_update:
        q = q.with_for_update()
    return (await db.execute(q)).scalar_one_or_none()


async def ensure_state(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID) -> None:
    await db.execute(
        insert(X)
        .values(tenant_id=tenant_id, session_id=session_id)
        .on_conflict_do_nothing(index_elements=[X.c.tenant_id, X.c.session_id])
    )


async def mark(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, **values: Any
) -> None:
    """Upsert the job fields of the session's extraction row."""
    if "last_error" in values:
        values["last_error"] = _clip(values["last_error"])
    values["updated_at"] = sa.func.now()
    # counters given as expressions of the row (runs + 1) apply to an existing row only
    first = {
        k: (1 if k == "runs" else v)
        for k, v in values.items()
        if k == "runs"
        or not isinstance(v, sa.ColumnElement)
        or isinstance(v, sa.sql.functions.FunctionElement)
    }
    stmt = insert(X).values(tenant_id=tenant_id, session_id=session_id, **first)
    # a function's value (now()) is the inserted row's: Citus calls no function but
    # immutable ones in an upsert's DO UPDATE
    update = {
        k: (stmt.excluded[k] if isinstance(v, sa.sql.functions.FunctionElement) else v)
        for k, v in values.items()
    }
    stmt = stmt.on_conflict_do_update(index_elements=[X.c.tenant_id, X.c.session_id], set_=update)
    await db.execute(stmt)


async def mark_pending(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, job_id: str
) -> None:
    """Queued; a running job keeps `running` (the queue deduplicates per session)."""
    now = sa.func.now()
    stmt = insert(X).values(
        tenant_id=tenant_id,
        session_id=session_id,
        status="pending",
        job_id=job_id,
        enqueued_at=now,
        updated_at=now,
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=[X.c.tenant_id, X.c.session_id],
        set_={
            "status": "pending",
            "job_id": job_id,
            "enqueued_at": stmt.excluded.enqueued_at,
            "updated_at": stmt.excluded.updated_at,
        },
        where=(X.c.status != "running") & (X.c.tenant_id == tenant_id),
    )
    await db.execute(stmt)


async def add_usage(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    calls: int,
    input_tokens: int,
    output_tokens: int,
) -> None:
    stmt = insert(X).values(
        tenant_id=tenant_id,
        session_id=session_id,
        llm_calls=calls,
        llm_input_tokens=input_tokens,
        llm_output_tokens=output_tokens,
    )
    await db.execute(
        stmt.on_conflict_do_update(
            index_elements=[X.c.tenant_id, X.c.session_id],
            set_={
                "llm_calls": X.c.llm_calls + calls,
                "llm_input_tokens": X.c.llm_input_tokens + input_tokens,
                "llm_output_tokens": X.c.llm_output_tokens + output_tokens,
            },
        )
    )


async def advance(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, watermark: int
) -> None:
    await db.execute(
        sa.update(X)
        .where(X.c.tenant_id == tenant_id, X.c.session_id == session_id)
        .values(watermark_seq=watermark, updated_at=sa.func.now())
    )


async def set_failed_ranges(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, ranges: list[dict[str, Any]]
) -> None:
    await db.execute(
        sa.update(X)
        .where(X.c.tenant_id == tenant_id, X.c.session_id == session_id)
        .values(failed_ranges=ranges, updated_at=sa.func.now())
    )


async def watermark(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID) -> int:
    return (await waiting_state(db, tenant_id, session_id))[0]


def retry_waiting(
    status: str | None,
    last_error: str | None,
    started_at: datetime | None = None,
    enqueued_at: datetime | None = None,
) -> bool:
    """The job is running, or a try failed and it is queued for its retry (`pending` with
    the try's error, started after it was last scheduled: a job scheduled again after
    its final failure is not a retry): an append must not move it later (its end
    follows up on what arrived meanwhile)."""
    if status == "running":
        return True
    if status != "pending" or last_error is None:
        return False
    return started_at is None or enqueued_at is None or started_at >= enqueued_at


_WAITING = sa.text("""
SELECT coalesce(x.watermark_seq, 0) AS watermark, x.status, x.last_error, x.started_at,
       x.enqueued_at,
       (SELECT count(*) FROM messages m
        WHERE m.tenant_id = :tid AND m.session_id = :sid AND m.role = 'user'
          AND m.seq > coalesce(x.watermark_seq, 0)) AS users
FROM (SELECT 1) one
LEFT JOIN fact_extractions x ON x.tenant_id = :tid AND x.session_id = :sid
""")


async def waiting_state(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> tuple[int, bool, int]:
    """The watermark, whether the job is busy (`retry_waiting`), and the user messages
    after the watermark (what a quiet run needs)."""
    row = (await db.execute(_WAITING, {"tid": tenant_id, "sid": session_id})).one()
    busy = retry_waiting(row.status, row.last_error, row.started_at, row.enqueued_at)
    return int(row.watermark), busy, int(row.users)


# --- the session and its messages --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionFacts:
    agent_id: str
    config: dict[str, Any]
    last_seq: int
    l1_start_seq: int | None
    watermark: int
    user_id: str | None = None


_SESSION = sa.text("""
SELECT s.agent_id, s.config, s.last_seq, m.l1_start_seq, s.user_id,
       coalesce(x.watermark_seq, 0) AS watermark
FROM sessions s
LEFT JOIN memory_states m ON m.tenant_id = s.tenant_id AND m.session_id = s.id
LEFT JOIN fact_extractions x ON x.tenant_id = s.tenant_id AND x.session_id = s.id
WHERE s.tenant_id = :tid AND s.id = :sid AND s.erasure_id IS NULL
""")


async def session_facts(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> SessionFacts | None:
    row = (await db.execute(_SESSION, {"tid": tenant_id, "sid": session_id})).first()
    if row is None:
        return None
    return SessionFacts(
        row.agent_id,
        dict(row.config or {}),
        int(row.last_seq),
        None if row.l1_start_seq is None else int(row.l1_start_seq),
        int(row.watermark),
        row.user_id,
    )


@dataclass(frozen=True, slots=True)
class BatchRow:
    seq: int
    role: str
    name: str | None
    text: str
    token_count: int
    created_at: datetime


_MESSAGES = sa.text("""
SELECT seq, role, name, text, token_count, created_at FROM messages
WHERE tenant_id = :tid AND session_id = :sid AND seq > :after AND seq <= :upto
ORDER BY seq LIMIT :limit
""")


async def messages_after(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    after: int,
    upto: int,
    limit: int,
) -> list[BatchRow]:
    rows = await db.execute(
        _MESSAGES,
        {"tid": tenant_id, "sid": session_id, "after": after, "upto": upto, "limit": limit},
    )
    return [
        BatchRow(int(r.seq), r.role, r.name, r.text or "", int(r.token_count), r.created_at)
        for r in rows
    ]


async def stale_extractions(
    db: AsyncSession, *, pending_before: datetime, running_before: datetime, limit: int
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """(tenant_id, session_id) of extractions pending since before `pending_before` (their
    enqueue may have been lost while Redis was down) or running since before
    `running_before` (worker and job lost). Deliberately cross-tenant: only the worker's
    cron pass calls it."""
    rows = await db.execute(
        sa.select(X.c.tenant_id, X.c.session_id)
        .prefix_with(FAN_OUT)
        .where(
            ((X.c.status == "pending") & (X.c.updated_at < pending_before))
            | ((X.c.status == "running") & (X.c.updated_at < running_before))
        )
        .order_by(X.c.updated_at)
        .limit(limit)
    )
    return [(r[0], r[1]) for r in rows]


# --- one run at a time --------------------------------------------------------


async def claim_run(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    owner: str,
    *,
    stale_after: float,
    attempts: int = 1,
) -> bool:
    """Take the session's extraction for `owner` (a job id, or a request's `wait:<id>`):
    its row becomes `running` under that owner, unless another owner runs it and its row
    moved within `stale_after` seconds (a run crashed without releasing it is taken over
    then). True when taken. A flush answered in the request (`?wait=true`) and the queued
    job both claim before reading a batch, so the two never ask the model for the same
    messages (2 LLM calls for 0 batches)."""
    now = sa.func.now()
    values = {
        "status": "running",
        "job_id": owner,
        "attempts": attempts,
        "started_at": now,
        "finished_at": None,
        "updated_at": now,
    }
    upsert = insert(X).values(tenant_id=tenant_id, session_id=session_id, **values)
    # the times of the update part are the inserted row's (Citus calls no function but
    # immutable ones there)
    fresh = upsert.excluded.updated_at
    stmt = upsert.on_conflict_do_update(
        index_elements=[X.c.tenant_id, X.c.session_id],
        set_={
            **values,
            "started_at": upsert.excluded.started_at,
            "updated_at": fresh,
        },
        where=(X.c.tenant_id == tenant_id)
        & sa.not_(
            (X.c.status == "running")
            & (X.c.job_id.is_distinct_from(owner))
            # a moment from this process's clock: Citus takes no function but immutable
            # ones in an upsert's WHERE (a claim goes stale in tens of seconds, far more
            # than the clocks of the app and the database differ)
            & (X.c.updated_at > datetime.now(UTC) - timedelta(seconds=stale_after))
        ),
    ).returning(X.c.session_id)
    return (await db.execute(stmt)).first() is not None


async def touch_run(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, owner: str
) -> None:
    """The owner still runs it (its claim is not stale)."""
    await db.execute(
        sa.update(X)
        .where(X.c.tenant_id == tenant_id, X.c.session_id == session_id, X.c.job_id == owner)
        .values(updated_at=sa.func.now())
    )
