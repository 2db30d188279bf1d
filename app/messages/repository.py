"""Message queries. Appends take the session row lock, so seqs are gap-free and unique."""

import json
import uuid
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from app.models import IdempotencyRecord, Message, Session

_INSERT = sa.text("""
INSERT INTO messages (session_id, seq, tenant_id, role, content, tool_calls, tool_use_id,
                      is_error, name, text, token_count, metadata, created_at, search_vector)
VALUES (:session_id, :seq, :tenant_id, :role, CAST(:content AS jsonb),
        CAST(:tool_calls AS jsonb), :tool_use_id, :is_error, :name, :text, :token_count,
        CAST(:metadata AS jsonb), :created_at, to_tsvector(CAST(:ts_config AS regconfig), :text))
""")


async def lock_session(db: AsyncSession, tenant_id: uuid.UUID,
                       session_id: uuid.UUID) -> Session | None:
    result = await db.execute(sa.select(Session).where(
        col(Session.tenant_id) == tenant_id, col(Session.id) == session_id).with_for_update())
    return result.scalar_one_or_none()


async def reserve_seqs(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, n: int,
                       tokens: int) -> tuple[int, str, str] | None:
    """Bump last_seq by n under the row lock. Returns (first seq, agent_id, ts config)."""
    result = await db.execute(sa.text("""
        UPDATE sessions SET last_seq = last_seq + :n, message_tokens = message_tokens + :t,
               updated_at = now()
        WHERE id = :sid AND tenant_id = :tid
        RETURNING last_seq, agent_id,
                  (SELECT text_search_config FROM tenants WHERE id = :tid)
    """), {"n": n, "t": tokens, "sid": session_id, "tid": tenant_id})
    row = result.first()
    if row is None:
        return None
    return int(row[0]) - n + 1, row[1], row[2]


async def insert_many(db: AsyncSession, rows: list[dict[str, Any]]) -> None:
    params = []
    for r in rows:
        params.append({**r, "content": json.dumps(r["content"]),
                       "tool_calls": json.dumps(r["tool_calls"]) if r["tool_calls"] else None,
                       "metadata": json.dumps(r["metadata"] or {})})
    await db.execute(_INSERT, params)


async def page(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, *,
               after_seq: int, limit: int) -> list[Message]:
    result = await db.execute(
        sa.select(Message).where(col(Message.tenant_id) == tenant_id,
                                 col(Message.session_id) == session_id,
                                 col(Message.seq) > after_seq)
        .order_by(col(Message.seq)).limit(limit))
    return list(result.scalars())


async def get_idempotent(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID,
                         key: str) -> IdempotencyRecord | None:
    result = await db.execute(sa.select(IdempotencyRecord).where(
        col(IdempotencyRecord.tenant_id) == tenant_id,
        col(IdempotencyRecord.session_id) == session_id, col(IdempotencyRecord.key) == key))
    return result.scalar_one_or_none()


async def save_idempotent(db: AsyncSession, record: IdempotencyRecord) -> None:
    db.add(record)
    await db.flush()


