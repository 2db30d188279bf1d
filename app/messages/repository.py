"""Message queries. Appends take the session row lock, so seqs are gap-free and unique."""

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from app.core.pg import dumps
from app.messages import prior as turn_prior
from app.messages.prior import ASKS_SQL
from app.models.memory_state import PRESSURE_SQL
from app.models.message import INDEXED_TEXT_SQL, StoredMessage, message_row_sql

# One statement appends a batch (SPEC: append p50 in one round trip): bump the session's
# last_seq and message_tokens under its row lock (seqs stay gap-free and unique; an agent
# key only matches its own agent's session), insert the rows with their token counts, times,
# search vectors (the tenant's text search config) and priors (`app.messages.prior`), and
# return what the pressure check
# needs (`app.jobs.triggers.pressure_from_row`) from the stored counters, with the status of
# the session's compression job. JSON parameters are JSON text (the convention of
# SQLAlchemy's asyncpg dialect, and of `app.core.pg`), so the statement runs on either.
_APPEND = f"""
WITH s AS (
  UPDATE sessions SET last_seq = last_seq + $3, message_tokens = message_tokens + $4,
         updated_at = now(), status = 'active', ended_at = NULL
  WHERE id = $2 AND tenant_id = $1 AND ($5::text IS NULL OR agent_id = $5)
    AND erasure_id IS NULL
  RETURNING last_seq, agent_id, config, message_tokens),
ins AS (
  INSERT INTO messages (session_id, seq, tenant_id, role, content, tool_calls, tool_use_id,
                        is_error, name, text, token_count, metadata, created_at, search_vector,
                        prior, timed)
  SELECT $2, s.last_seq - $3 + r.i, $1, r.role, r.content, r.tool_calls, r.tool_use_id,
         r.is_error, r.name, r.text, r.token_count, r.metadata, r.created_at,
         to_tsvector(t.text_search_config::regconfig, {INDEXED_TEXT_SQL.format(text="r.text")}),
         -- the first row answers the session's last message when that one asks, by another
         -- role ($18: its prior as an answer; app.messages.prior)
         CASE WHEN r.i = 1 THEN
           CASE WHEN EXISTS (
             SELECT 1 FROM messages m
             WHERE m.tenant_id = $1 AND m.session_id = $2 AND m.seq = s.last_seq - $3
               AND m.role <> r.role AND {ASKS_SQL})
           THEN $18::real ELSE r.prior END
         ELSE r.prior END,
         r.timed
  FROM s, tenants t,
       unnest($6::text[], $7::jsonb[], $8::jsonb[], $9::text[], $10::bool[], $11::text[],
              $12::text[], $13::int[], $14::jsonb[], $15::timestamptz[], $16::real[],
              $17::bool[])
         WITH ORDINALITY AS r(role, content, tool_calls, tool_use_id, is_error, name, text,
                              token_count, metadata, created_at, prior, timed, i)
  WHERE t.id = $1
  RETURNING 1)
SELECT s.agent_id, {PRESSURE_SQL}, (SELECT count(*) FROM ins) AS inserted
FROM s LEFT JOIN memory_states m ON m.session_id = $2 AND m.tenant_id = $1
LEFT JOIN compression_jobs j ON j.session_id = $2 AND j.tenant_id = $1
"""


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A canonical message with its token count and time, as the append stores it."""

    role: str
    content: Any
    tool_calls: list[dict[str, Any]] | None
    tool_use_id: str | None
    is_error: bool
    name: str | None
    text: str
    token_count: int
    metadata: dict[str, Any] | None
    created_at: datetime


async def append_rows(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    agent_id: str | None,
    rows: list[NewMessage],
) -> asyncpg.Record | None:
    """Append `rows` in one statement (see `_APPEND`); None when the session does not exist
    in the tenant, or belongs to another agent than `agent_id` (None: any agent). The
    record: last_seq, agent_id, config, l1_start_seq, fixed_tokens, l1_tokens, job_status
    (the memory columns are None for a session without memory state), inserted."""
    priors = turn_prior.priors((r.role, r.text) for r in rows)
    # the first row's prior were it the answer to the session's last message
    first_answer = turn_prior.as_answer(priors[0][0]) if priors else 0.0
    row = await conn.fetchrow(
        _APPEND,
        tenant_id,
        session_id,
        len(rows),
        sum(r.token_count for r in rows),
        agent_id,
        [r.role for r in rows],
        [dumps(r.content) for r in rows],
        [dumps(r.tool_calls) if r.tool_calls else None for r in rows],
        [r.tool_use_id for r in rows],
        [r.is_error for r in rows],
        [r.name for r in rows],
        [r.text for r in rows],
        [r.token_count for r in rows],
        [dumps(r.metadata or {}) for r in rows],
        [r.created_at for r in rows],
        [p for p, _ in priors],
        [t for _, t in priors],
        first_answer,
    )
    if row is not None and row["inserted"] != len(rows):  # the tenant row is gone
        raise RuntimeError(f"append inserted {row['inserted']} of {len(rows)} messages")
    return row


_LOCK_SESSION = """
SELECT 1 FROM sessions
WHERE tenant_id = $1 AND id = $2 AND ($3::text IS NULL OR agent_id = $3) AND erasure_id IS NULL
FOR UPDATE
"""


async def lock_session(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID, agent_id: str | None
) -> bool:
    """Lock the session row for the transaction of `conn`; False when the tenant has no
    such session (or it belongs to another agent than `agent_id`; None: any agent)."""
    return await conn.fetchval(_LOCK_SESSION, tenant_id, session_id, agent_id) is not None


_PAGE = f"""
SELECT {message_row_sql()}, text FROM messages
WHERE tenant_id = $1 AND session_id = $2 AND seq > $3
ORDER BY seq LIMIT $4
"""


async def page(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    after_seq: int,
    limit: int,
) -> list[StoredMessage]:
    """The session's messages after `after_seq`, oldest first, with their text (the
    history's pages and `recall_conversation`)."""
    rows = await conn.fetch(_PAGE, tenant_id, session_id, after_seq, limit)
    return [StoredMessage._make(r) for r in rows]


# The Idempotency-Key: read the key's first result, and the session's visibility, in one
# autocommitted statement (a committed record is final: a replay needs no lock); without
# one, `_APPEND` (which locks the session row) and `_SAVE_IDEMPOTENT` in one transaction. A
# concurrent request with the same key that committed first makes the save insert nothing:
# that transaction is rolled back and the first result replayed. Five round trips with
# BEGIN and COMMIT.
_READ_IDEMPOTENT = """
SELECT s.agent_id, i.request_hash, i.response
FROM sessions s
LEFT JOIN idempotency_records i ON i.tenant_id = $1 AND i.session_id = $2 AND i.key = $4
WHERE s.tenant_id = $1 AND s.id = $2 AND ($3::text IS NULL OR s.agent_id = $3)
"""
_SAVE_IDEMPOTENT = """
INSERT INTO idempotency_records (tenant_id, session_id, key, request_hash, status_code,
                                 response)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT DO NOTHING
RETURNING 1
"""


async def read_idempotent(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    agent_id: str | None,
    key: str,
) -> asyncpg.Record | None:
    """The key's record as (agent_id, request_hash, response), both None without one; None
    when the session is not in the tenant, or of another agent than `agent_id`."""
    return await conn.fetchrow(_READ_IDEMPOTENT, tenant_id, session_id, agent_id, key)


async def save_idempotent(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    key: str,
    request_hash: str,
    status_code: int,
    response: dict[str, Any],
) -> bool:
    """Store the key's first result; False when another request stored one first."""
    return (
        await conn.fetchval(
            _SAVE_IDEMPOTENT, tenant_id, session_id, key, request_hash, status_code, dumps(response)
        )
        is not None
    )


_NEWEST_USER_TEXT = (
    "SELECT text FROM messages WHERE tenant_id = $1 AND session_id = $2 AND role = 'user' "
    "AND text <> '' ORDER BY seq DESC LIMIT 1"
)


async def newest_user_text(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> str:
    """The text of the session's newest user message with text ('' when there is none)."""
    text = await conn.fetchval(_NEWEST_USER_TEXT, tenant_id, session_id)
    return str(text) if text is not None else ""
