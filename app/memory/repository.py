"""Memory SQL. Every query filters by tenant; writers lock the state row.

`read` is the one read of a session's memory (the session row, its state, L2, L1 and the
promoted messages) in one raw-SQL statement: the context build runs it on the hot paths'
pool (`app.core.pg`), `GET .../memory`, compression and promotion on the connection under
their SQLAlchemy session. Its rows are the plain immutable rows of the table models
(`SessionRow`, `StateRow`, `SummaryRow`, `StoredMessage`), whose select lists come from the
models.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple

import asyncpg
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from app.core.pg import dumps
from app.memory.policy import DEFAULT_L1_MAX_MESSAGES
from app.models import Message
from app.models.base import table_of
from app.models.memory import MemorySnapshot, MemoryState, MemorySummary
from app.models.memory_state import (
    L1_TOKENS_SQL,
    MEMORY_TOKENS_SQL,
    STATE_ROW_COLUMNS,
    StateRow,
)
from app.models.memory_summary import SUMMARY_ROW_COLUMNS, SummaryRow
from app.models.message import MESSAGE_ROW_COLUMNS, StoredMessage
from app.models.session import SESSION_ROW_COLUMNS, SessionRow

# A context build reads the newest L1_WINDOW_PER_MESSAGE * l1_max_messages +
# L1_WINDOW_EXTRA messages (plus the current turn): enough for the FIFO cap and the
# thresholds; older backlog becomes one pointer (`app.memory.aggregate.trim_window`).
L1_WINDOW_PER_MESSAGE = 4
L1_WINDOW_EXTRA = 16


@dataclass(frozen=True, slots=True)
class Window:
    """Which L1 messages `read` takes: `context`, the newest window a context build shows
    (see `L1_WINDOW_PER_MESSAGE`) and the current turn; `all` of them; or the `oldest`
    `limit` (compression works through a long backlog chunk by chunk)."""

    kind: Literal["context", "all", "oldest"]
    limit: int | None = None


CONTEXT = Window("context")
ALL_L1 = Window("all")


def oldest(limit: int) -> Window:
    return Window("oldest", limit)


class MemoryRows(NamedTuple):
    """What `read` returns: the session, its state (None for a session made before memory
    existed) and the rows of its layers, oldest first."""

    session: SessionRow
    state: StateRow | None
    l2: list[SummaryRow]
    l1: list[StoredMessage]
    promoted: list[StoredMessage]


def _array(columns: Sequence[str]) -> str:
    return f"json_build_array({', '.join(columns)})"


# the L1 window over the session's config
_WINDOW = (
    f"({L1_WINDOW_PER_MESSAGE} * coalesce((s.config ->> 'l1_max_messages')::int, "
    f"{DEFAULT_L1_MAX_MESSAGES}) + {L1_WINDOW_EXTRA})"
)
_L1_FROM = {
    "context": f"""GREATEST(st.l1_start_seq, LEAST(s.last_seq - {_WINDOW} + 1,
                   (SELECT u.seq FROM messages u WHERE u.tenant_id = $1
                      AND u.session_id = $2 AND u.seq >= st.l1_start_seq
                      AND u.role = 'user' ORDER BY u.seq DESC LIMIT 1)))""",
    "all": "st.l1_start_seq",
    "oldest": "st.l1_start_seq",
}


@functools.cache
def _read_sql(kind: str) -> str:
    # Nested rows come as JSON arrays in their row type's field order (no keys to decode).
    limit = "ORDER BY seq LIMIT $3" if kind == "oldest" else ""
    return f"""
SELECT {", ".join(f"s.{c}" for c in SESSION_ROW_COLUMNS)},
  st.session_id IS NOT NULL AS has_state,
  {", ".join(f"st.{c}" for c in STATE_ROW_COLUMNS)},
  (SELECT coalesce(json_agg({_array(SUMMARY_ROW_COLUMNS)} ORDER BY start_seq), '[]')
     FROM memory_summaries
     WHERE tenant_id = $1 AND session_id = $2 AND snapshot_id IS NULL) AS l2,
  (SELECT coalesce(json_agg(y.r ORDER BY y.seq), '[]')
     FROM (SELECT seq, {_array(MESSAGE_ROW_COLUMNS)} AS r FROM messages
           WHERE tenant_id = $1 AND session_id = $2 AND seq >= {_L1_FROM[kind]}
           {limit}) y) AS l1,
  (SELECT coalesce(json_agg({_array(MESSAGE_ROW_COLUMNS)} ORDER BY seq), '[]')
     FROM messages
     WHERE tenant_id = $1 AND session_id = $2
       AND seq = ANY(ARRAY(SELECT jsonb_array_elements_text(st.promoted_seqs)::bigint))
  ) AS promoted
FROM sessions s LEFT JOIN memory_states st ON st.session_id = s.id AND st.tenant_id = $1
WHERE s.tenant_id = $1 AND s.id = $2 AND s.erasure_id IS NULL
"""


_N_SESSION = len(SESSION_ROW_COLUMNS)
_N_STATE = len(STATE_ROW_COLUMNS)
_STATE_AT = _N_SESSION + 1
_LAYERS_AT = _STATE_AT + _N_STATE


def _messages(items: list[list[Any]]) -> list[StoredMessage]:
    return [StoredMessage(*i) for i in items]


async def read(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID, window: Window = ALL_L1
) -> MemoryRows | None:
    """A session's memory in one statement; None when the tenant has no such session.
    Runs on the pool and under a SQLAlchemy session alike (JSON decoded by either)."""
    args = (window.limit,) if window.kind == "oldest" else ()
    row = await conn.fetchrow(_read_sql(window.kind), tenant_id, session_id, *args)
    if row is None:
        return None
    session = SessionRow._make(row[:_N_SESSION])
    if not row[_N_SESSION]:
        return MemoryRows(session, None, [], [], [])
    l2, l1, promoted = row[_LAYERS_AT:]
    return MemoryRows(
        session,
        StateRow._make(row[_STATE_AT:_LAYERS_AT]),
        [SummaryRow._make(x) for x in l2],
        _messages(l1),
        _messages(promoted),
    )


_LOCK = "SELECT 1 FROM memory_states WHERE tenant_id = $1 AND session_id = $2 FOR UPDATE"


async def lock_state(conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID) -> bool:
    """Lock the session's state row for the transaction (False: it has none). A statement of
    its own, before `read`: a read that waited on the lock inside its own statement would
    see the other layers as they were before the writer it waited for committed."""
    return await conn.fetchval(_LOCK, tenant_id, session_id) is not None


_ENSURE = """
INSERT INTO memory_states (tenant_id, session_id, rom, kernel, promoted_seqs)
VALUES ($1, $2, '{}', '{}', '[]') ON CONFLICT (tenant_id, session_id) DO NOTHING
"""


async def ensure_state(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> None:
    """Create an empty state for a session that has none (idempotent under races)."""
    await conn.execute(_ENSURE, tenant_id, session_id)


_SET_KERNEL = f"""
UPDATE memory_states SET kernel = $3, kernel_tokens = $4, version = version + 1,
       updated_at = now()
WHERE tenant_id = $1 AND session_id = $2
RETURNING {", ".join(STATE_ROW_COLUMNS)}
"""


async def set_kernel(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    kernel: dict[str, Any],
    kernel_tokens: int,
) -> StateRow:
    """Store the Kernel of a state row the caller has locked (`app.memory.aggregate.load`
    with `lock`): the state as it now is."""
    row = await conn.fetchrow(_SET_KERNEL, tenant_id, session_id, dumps(kernel), kernel_tokens)
    assert row is not None  # locked by the caller: it exists
    return StateRow._make(row)


_SUMMARIES = f"""
SELECT {", ".join("id::text" if c == "id" else c for c in SUMMARY_ROW_COLUMNS)}
FROM memory_summaries WHERE tenant_id = $1 AND session_id = $2 AND id = ANY($3::uuid[])
"""


async def summaries(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    ids: Sequence[uuid.UUID],
) -> list[SummaryRow]:
    """Summaries of a session by id, in L2 or archived in a snapshot (a recorded build's
    replay names them), as `read` takes them."""
    return [SummaryRow._make(r) for r in await conn.fetch(_SUMMARIES, tenant_id, session_id, ids)]


async def update_state(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, **values: Any
) -> None:
    """Change a state row the caller has locked: the given columns, a new `version`, and
    `updated_at`."""
    await db.execute(
        sa.update(MemoryState)
        .where(col(MemoryState.tenant_id) == tenant_id, col(MemoryState.session_id) == session_id)
        .values(version=col(MemoryState.version) + 1, updated_at=datetime.now(UTC), **values)
    )


# Promotion's reads of single messages take `StoredMessage` rows, like `read`.
_T = table_of(Message).c
_MSG_COLS = tuple(_T[c] for c in MESSAGE_ROW_COLUMNS)


def _msg_select() -> sa.Select:
    return sa.select(*_MSG_COLS)


async def add_state(db: AsyncSession, state: MemoryState) -> None:
    db.add(state)
    await db.flush()


async def messages_by_seqs(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, seqs: Sequence[int]
) -> list[StoredMessage]:
    if not seqs:
        return []
    q = (
        _msg_select()
        .where(
            col(Message.tenant_id) == tenant_id,
            col(Message.session_id) == session_id,
            col(Message.seq).in_(list(seqs)),
        )
        .order_by(col(Message.seq))
    )
    return [StoredMessage(*r) for r in await db.execute(q)]


async def tool_partners(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, call_ids: Sequence[str]
) -> list[StoredMessage]:
    """Messages that issued or answered any of ``call_ids`` (to promote whole groups)."""
    if not call_ids:
        return []
    issued = sa.or_(*[col(Message.tool_calls).contains([{"id": cid}]) for cid in call_ids])
    q = (
        _msg_select()
        .where(
            col(Message.tenant_id) == tenant_id,
            col(Message.session_id) == session_id,
            sa.or_(col(Message.tool_use_id).in_(list(call_ids)), issued),
        )
        .order_by(col(Message.seq))
    )
    return [StoredMessage(*r) for r in await db.execute(q)]


async def add_summaries(db: AsyncSession, rows: Sequence[MemorySummary]) -> None:
    db.add_all(list(rows))
    await db.flush()


async def archive(
    db: AsyncSession, snapshot: MemorySnapshot, summary_ids: Sequence[uuid.UUID]
) -> None:
    """Write an L2 snapshot and move its summaries out of L2."""
    db.add(snapshot)
    await db.flush()
    await db.execute(
        sa.update(MemorySummary)
        .where(
            col(MemorySummary.tenant_id) == snapshot.tenant_id,
            col(MemorySummary.id).in_(list(summary_ids)),
        )
        .values(snapshot_id=snapshot.id)
    )


async def snapshots_page(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    before_start: int | None,
    limit: int,
) -> list[MemorySnapshot]:
    """Newest first (by covered range), cursor = the last row's ``start_seq``."""
    q = sa.select(MemorySnapshot).where(
        col(MemorySnapshot.tenant_id) == tenant_id, col(MemorySnapshot.session_id) == session_id
    )
    if before_start is not None:
        q = q.where(col(MemorySnapshot.start_seq) < before_start)
    q = q.order_by(col(MemorySnapshot.start_seq).desc()).limit(limit)
    return list((await db.execute(q)).scalars())


async def snapshot_count(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID) -> int:
    q = (
        sa.select(sa.func.count())
        .select_from(MemorySnapshot)
        .where(
            col(MemorySnapshot.tenant_id) == tenant_id, col(MemorySnapshot.session_id) == session_id
        )
    )
    return int((await db.execute(q)).scalar_one())


_MEMORY_TOKENS = sa.text(f"""
SELECT {MEMORY_TOKENS_SQL}
FROM sessions s JOIN memory_states m ON m.tenant_id = :t AND m.session_id = :sid
WHERE s.tenant_id = :t AND s.id = :sid
""")


async def memory_tokens(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> int | None:
    """The session's stored memory tokens (ROM + Kernel + L2 + promoted + L1) from the
    counters, as the append and the jobs read them; None without a memory state."""
    value = (await db.execute(_MEMORY_TOKENS, {"t": tenant_id, "sid": session_id})).scalar()
    return None if value is None else int(value)


_LAYER_COUNTERS = sa.text(f"""
SELECT m.session_id, m.rom_tokens, m.kernel_tokens, m.l2_tokens, m.promoted_tokens,
       GREATEST(0, {L1_TOKENS_SQL}) AS l1_tokens
FROM memory_states m JOIN sessions s ON s.tenant_id = :t AND s.id = m.session_id
WHERE m.tenant_id = :t AND m.session_id IN :ids
""").bindparams(sa.bindparam("ids", expanding=True))


async def layer_counters(
    db: AsyncSession, tenant_id: uuid.UUID, session_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, Any]:
    """The stored tokens per layer of some sessions of one tenant (a page of the session
    list), by session id: rom_tokens, kernel_tokens, l2_tokens, promoted_tokens, l1_tokens;
    sessions without a memory state are left out."""
    if not session_ids:
        return {}
    result = await db.execute(_LAYER_COUNTERS, {"t": tenant_id, "ids": list(session_ids)})
    return {r.session_id: r for r in result}
