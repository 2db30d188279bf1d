"""Memory SQL. Every query filters by tenant; writers lock the state row."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from app.models import Message
from app.models.base import table_of
from app.models.memory import MemorySnapshot, MemoryState, MemorySummary
from app.models.message import MESSAGE_ROW_COLUMNS

# Memory reads take plain rows of MESSAGE_ROW_COLUMNS (attribute access like the model,
# see `MessageRow`): no ORM identity map, no search_vector or text.
_T = table_of(Message).c
_MSG_COLS = tuple(_T[c].label("meta") if c == "metadata" else _T[c]
                  for c in MESSAGE_ROW_COLUMNS)


def _msg_select() -> sa.Select:
    return sa.select(*_MSG_COLS)


async def get_state(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, *,
                    lock: bool = False) -> MemoryState | None:
    q = sa.select(MemoryState).where(col(MemoryState.tenant_id) == tenant_id,
                                     col(MemoryState.session_id) == session_id)
    if lock:
        q = q.with_for_update()
    else:
        # a reader must see the row as stored, not a stale identity-map copy
        q = q.execution_options(populate_existing=True)
    return (await db.execute(q)).scalar_one_or_none()


async def add_state(db: AsyncSession, state: MemoryState) -> None:
    db.add(state)
    await db.flush()


async def ensure_state(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID) -> None:
    """Create an empty state for a session that has none (idempotent under races)."""
    await db.execute(pg_insert(MemoryState).values(
        session_id=session_id, tenant_id=tenant_id, rom={}, kernel={}, promoted_seqs=[],
    ).on_conflict_do_nothing(index_elements=["tenant_id", "session_id"]))


async def messages_from(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID,
                        first_seq: int, limit: int | None = None) -> list[Any]:
    """L1: every message at or after ``first_seq`` (or the first ``limit``), oldest first."""
    q = (_msg_select().where(col(Message.tenant_id) == tenant_id,
                             col(Message.session_id) == session_id,
                             col(Message.seq) >= first_seq)
         .order_by(col(Message.seq)))
    if limit is not None:
        q = q.limit(limit)
    return list((await db.execute(q)).all())


async def messages_by_seqs(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID,
                           seqs: Sequence[int]) -> list[Any]:
    if not seqs:
        return []
    q = (_msg_select().where(col(Message.tenant_id) == tenant_id,
                             col(Message.session_id) == session_id,
                             col(Message.seq).in_(list(seqs)))
         .order_by(col(Message.seq)))
    return list((await db.execute(q)).all())


async def tool_partners(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID,
                        call_ids: Sequence[str]) -> list[Any]:
    """Messages that issued or answered any of ``call_ids`` (to promote whole groups)."""
    if not call_ids:
        return []
    issued = sa.or_(*[col(Message.tool_calls).contains([{"id": cid}]) for cid in call_ids])
    q = (_msg_select().where(col(Message.tenant_id) == tenant_id,
                             col(Message.session_id) == session_id,
                             sa.or_(col(Message.tool_use_id).in_(list(call_ids)), issued))
         .order_by(col(Message.seq)))
    return list((await db.execute(q)).all())


async def l1_tokens(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID,
                    first_seq: int, end_seq: int | None = None) -> int:
    """Tokens of the messages from `first_seq` on (before `end_seq` when given)."""
    q = sa.select(sa.func.coalesce(sa.func.sum(col(Message.token_count)), 0)).where(
        col(Message.tenant_id) == tenant_id, col(Message.session_id) == session_id,
        col(Message.seq) >= first_seq)
    if end_seq is not None:
        q = q.where(col(Message.seq) < end_seq)
    return int((await db.execute(q)).scalar_one())


async def l2_summaries(db: AsyncSession, tenant_id: uuid.UUID,
                       session_id: uuid.UUID) -> list[MemorySummary]:
    q = (sa.select(MemorySummary).where(col(MemorySummary.tenant_id) == tenant_id,
                                        col(MemorySummary.session_id) == session_id,
                                        col(MemorySummary.snapshot_id).is_(None))
         .order_by(col(MemorySummary.start_seq)))
    return list((await db.execute(q)).scalars())


async def add_summaries(db: AsyncSession, rows: Sequence[MemorySummary]) -> None:
    db.add_all(list(rows))
    await db.flush()


async def archive(db: AsyncSession, snapshot: MemorySnapshot,
                  summary_ids: Sequence[uuid.UUID]) -> None:
    """Write an L2 snapshot and move its summaries out of L2."""
    db.add(snapshot)
    await db.flush()
    await db.execute(sa.update(MemorySummary)
                     .where(col(MemorySummary.tenant_id) == snapshot.tenant_id,
                            col(MemorySummary.id).in_(list(summary_ids)))
                     .values(snapshot_id=snapshot.id))


async def snapshots_page(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, *,
                         before_start: int | None, limit: int) -> list[MemorySnapshot]:
    """Newest first (by covered range), cursor = the last row's ``start_seq``."""
    q = sa.select(MemorySnapshot).where(col(MemorySnapshot.tenant_id) == tenant_id,
                                        col(MemorySnapshot.session_id) == session_id)
    if before_start is not None:
        q = q.where(col(MemorySnapshot.start_seq) < before_start)
    q = q.order_by(col(MemorySnapshot.start_seq).desc()).limit(limit)
    return list((await db.execute(q)).scalars())


async def snapshot_count(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID) -> int:
    q = sa.select(sa.func.count()).select_from(MemorySnapshot).where(
        col(MemorySnapshot.tenant_id) == tenant_id, col(MemorySnapshot.session_id) == session_id)
    return int((await db.execute(q)).scalar_one())


async def states_of(db: AsyncSession, tenant_id: uuid.UUID,
                    session_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, MemoryState]:
    """The memory states of some sessions of one tenant (a page of the session list)."""
    if not session_ids:
        return {}
    q = sa.select(MemoryState).where(col(MemoryState.tenant_id) == tenant_id,
                                     col(MemoryState.session_id).in_(list(session_ids)))
    return {s.session_id: s for s in (await db.execute(q)).scalars()}
