"""SQL of a session's fact extraction (apart from the facts store's statements,
`app.facts.repository`): its state row (watermark, job status, usage, failed ranges, the
claim that lets one run at a time read a batch), the session and the messages of a batch.
Every statement names `tenant_id`; callers commit."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from app.core.partitions import FAN_OUT
from app.core.pg import dumps
from app.models.fact import FACT_EXTRACTION_ROW_COLUMNS, FactExtractionRow

MAX_ERROR_CHARS = 500


class _Computed:
    """A value of `mark` the database computes."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


# the statement's time, and one run more (1 on a new row)
NOW: Any = _Computed("NOW")
RUNS_PLUS_ONE: Any = _Computed("RUNS_PLUS_ONE")
_JSON = frozenset({"last_result", "failed_ranges"})
_COLUMNS = ", ".join(FACT_EXTRACTION_ROW_COLUMNS)
_MARKABLE = frozenset(FACT_EXTRACTION_ROW_COLUMNS) - {"tenant_id", "session_id", "updated_at"}


def _clip(error: str | None) -> str | None:
    return None if error is None else error[:MAX_ERROR_CHARS]


_GET = f"SELECT {_COLUMNS} FROM fact_extractions WHERE tenant_id = $1 AND session_id = $2"
_GET_FOR_UPDATE = _GET + " FOR UPDATE"


async def get_state(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    for_update: bool = False,
) -> FactExtractionRow | None:
    row = await conn.fetchrow(_GET_FOR_UPDATE if for_update else _GET, tenant_id, session_id)
    return None if row is None else FactExtractionRow._make(row)


_ENSURE = """
INSERT INTO fact_extractions (tenant_id, session_id) VALUES ($1, $2)
ON CONFLICT (tenant_id, session_id) DO NOTHING
"""


async def ensure_state(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> None:
    await conn.execute(_ENSURE, tenant_id, session_id)


async def mark(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID, **values: Any
) -> None:
    """Upsert the job fields of the session's extraction row. A value `NOW` is the
    statement's time, `RUNS_PLUS_ONE` counts a run (1 on a new row)."""
    unknown = set(values) - _MARKABLE
    if unknown:
        raise ValueError(f"not a field of fact_extractions: {sorted(unknown)}")
    if "last_error" in values:
        values["last_error"] = _clip(values["last_error"])
    values["updated_at"] = NOW
    args: list[Any] = [tenant_id, session_id]
    inserted: list[str] = []
    update: list[str] = []
    for k, v in values.items():
        if v is NOW:
            inserted.append("now()")
            # the inserted row's time: Citus calls no function but immutable ones in an
            # upsert's DO UPDATE
            update.append(f"{k} = EXCLUDED.{k}")
        elif v is RUNS_PLUS_ONE:
            inserted.append("1")  # counters of the row apply to an existing row only
            update.append(f"{k} = fact_extractions.{k} + 1")
        else:
            args.append(dumps(v) if k in _JSON else v)
            inserted.append(f"${len(args)}")
            update.append(f"{k} = EXCLUDED.{k}")
    sql = (
        f"INSERT INTO fact_extractions (tenant_id, session_id, {', '.join(values)}) "
        f"VALUES ($1, $2, {', '.join(inserted)}) "
        f"ON CONFLICT (tenant_id, session_id) DO UPDATE SET {', '.join(update)}"
    )
    await conn.execute(sql, *args)


_MARK_PENDING = """
INSERT INTO fact_extractions (tenant_id, session_id, status, job_id, enqueued_at, updated_at)
VALUES ($1, $2, 'pending', $3, now(), now())
ON CONFLICT (tenant_id, session_id) DO UPDATE
SET status = 'pending', job_id = EXCLUDED.job_id, enqueued_at = EXCLUDED.enqueued_at,
    updated_at = EXCLUDED.updated_at
WHERE fact_extractions.status <> 'running' AND fact_extractions.tenant_id = $1
"""


async def mark_pending(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID, job_id: str
) -> None:
    """Queued; a running job keeps `running` (the queue deduplicates per session)."""
    await conn.execute(_MARK_PENDING, tenant_id, session_id, job_id)


_ADD_USAGE = """
INSERT INTO fact_extractions (tenant_id, session_id, llm_calls, llm_input_tokens,
                              llm_output_tokens)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (tenant_id, session_id) DO UPDATE
SET llm_calls = fact_extractions.llm_calls + EXCLUDED.llm_calls,
    llm_input_tokens = fact_extractions.llm_input_tokens + EXCLUDED.llm_input_tokens,
    llm_output_tokens = fact_extractions.llm_output_tokens + EXCLUDED.llm_output_tokens
"""


async def add_usage(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    calls: int,
    input_tokens: int,
    output_tokens: int,
) -> None:
    await conn.execute(_ADD_USAGE, tenant_id, session_id, calls, input_tokens, output_tokens)


_ADVANCE = """
UPDATE fact_extractions SET watermark_seq = $3, updated_at = now()
WHERE tenant_id = $1 AND session_id = $2
"""


async def advance(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID, watermark: int
) -> None:
    await conn.execute(_ADVANCE, tenant_id, session_id, watermark)


_SET_FAILED = """
UPDATE fact_extractions SET failed_ranges = $3, updated_at = now()
WHERE tenant_id = $1 AND session_id = $2
"""


async def set_failed_ranges(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    ranges: list[dict[str, Any]],
) -> None:
    await conn.execute(_SET_FAILED, tenant_id, session_id, dumps(ranges))


async def watermark(conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID) -> int:
    return (await waiting_state(conn, tenant_id, session_id))[0]


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


_WAITING = """
SELECT coalesce(x.watermark_seq, 0) AS watermark, x.status, x.last_error, x.started_at,
       x.enqueued_at,
       (SELECT count(*) FROM messages m
        WHERE m.tenant_id = $1 AND m.session_id = $2 AND m.role = 'user'
          AND m.seq > coalesce(x.watermark_seq, 0)) AS users
FROM (SELECT 1) one
LEFT JOIN fact_extractions x ON x.tenant_id = $1 AND x.session_id = $2
"""


async def waiting_state(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> tuple[int, bool, int]:
    """The watermark, whether the job is busy (`retry_waiting`), and the user messages
    after the watermark (what a quiet run needs)."""
    row = await conn.fetchrow(_WAITING, tenant_id, session_id)
    assert row is not None  # one row whatever the state
    busy = retry_waiting(row["status"], row["last_error"], row["started_at"], row["enqueued_at"])
    return int(row["watermark"]), busy, int(row["users"])


# --- the session and its messages --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionFacts:
    agent_id: str
    config: dict[str, Any]
    last_seq: int
    l1_start_seq: int | None
    watermark: int
    user_id: str | None = None


_SESSION = """
SELECT s.agent_id, s.config, s.last_seq, m.l1_start_seq, s.user_id,
       coalesce(x.watermark_seq, 0) AS watermark
FROM sessions s
LEFT JOIN memory_states m ON m.tenant_id = s.tenant_id AND m.session_id = s.id
LEFT JOIN fact_extractions x ON x.tenant_id = s.tenant_id AND x.session_id = s.id
WHERE s.tenant_id = $1 AND s.id = $2 AND s.erasure_id IS NULL
"""


async def session_facts(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> SessionFacts | None:
    row = await conn.fetchrow(_SESSION, tenant_id, session_id)
    if row is None:
        return None
    return SessionFacts(
        row["agent_id"],
        dict(row["config"] or {}),
        int(row["last_seq"]),
        None if row["l1_start_seq"] is None else int(row["l1_start_seq"]),
        int(row["watermark"]),
        row["user_id"],
    )


@dataclass(frozen=True, slots=True)
class BatchRow:
    seq: int
    role: str
    name: str | None
    text: str
    token_count: int
    created_at: datetime


_MESSAGES = """
SELECT seq, role, name, text, token_count, created_at FROM messages
WHERE tenant_id = $1 AND session_id = $2 AND seq > $3 AND seq <= $4
ORDER BY seq LIMIT $5
"""


async def messages_after(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    after: int,
    upto: int,
    limit: int,
) -> list[BatchRow]:
    rows = await conn.fetch(_MESSAGES, tenant_id, session_id, after, upto, limit)
    return [BatchRow(int(r[0]), r[1], r[2], r[3] or "", int(r[4]), r[5]) for r in rows]


_STALE = f"""
SELECT {FAN_OUT} tenant_id, session_id FROM fact_extractions
WHERE (status = 'pending' AND updated_at < $1) OR (status = 'running' AND updated_at < $2)
ORDER BY updated_at LIMIT $3
"""


async def stale_extractions(
    conn: asyncpg.Connection, *, pending_before: datetime, running_before: datetime, limit: int
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """(tenant_id, session_id) of extractions pending since before `pending_before` (their
    enqueue may have been lost while Redis was down) or running since before
    `running_before` (worker and job lost). Deliberately cross-tenant: only the worker's
    cron pass calls it."""
    rows = await conn.fetch(_STALE, pending_before, running_before, limit)
    return [(r[0], r[1]) for r in rows]


# --- one run at a time --------------------------------------------------------

# The times of the update part are the inserted row's (Citus calls no function but
# immutable ones there); the staleness bound is a moment from this process's clock: Citus
# takes no function but immutable ones in an upsert's WHERE (a claim goes stale in tens of
# seconds, far more than the clocks of the app and the database differ).
_CLAIM = """
INSERT INTO fact_extractions (tenant_id, session_id, status, job_id, attempts, started_at,
                              finished_at, updated_at)
VALUES ($1, $2, 'running', $3, $4, now(), NULL, now())
ON CONFLICT (tenant_id, session_id) DO UPDATE
SET status = 'running', job_id = EXCLUDED.job_id, attempts = EXCLUDED.attempts,
    started_at = EXCLUDED.started_at, finished_at = NULL, updated_at = EXCLUDED.updated_at
WHERE fact_extractions.tenant_id = $1
  AND NOT (fact_extractions.status = 'running'
           AND fact_extractions.job_id IS DISTINCT FROM $3
           AND fact_extractions.updated_at > $5)
RETURNING session_id
"""


async def claim_run(
    conn: asyncpg.Connection,
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
    fresh_since = datetime.now(UTC) - timedelta(seconds=stale_after)
    row = await conn.fetchrow(_CLAIM, tenant_id, session_id, owner, attempts, fresh_since)
    return row is not None


_TOUCH = """
UPDATE fact_extractions SET updated_at = now()
WHERE tenant_id = $1 AND session_id = $2 AND job_id = $3
"""


async def touch_run(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID, owner: str
) -> None:
    """The owner still runs it (its claim is not stale)."""
    await conn.execute(_TOUCH, tenant_id, session_id, owner)
