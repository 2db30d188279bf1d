"""Memory SQL. Every statement names the tenant; writers lock the state row.

Every function runs SQL on an asyncpg connection: the hot paths' pool (`app.core.pg`) for
the context build, the other pool's (`app.core.db`, inside a
transaction) for the routes and the compression job. Rows come back as the plain
immutable rows of the table models (`SessionRow`, `StateRow`, `SummaryRow`, `StoredMessage`,
`SnapshotRow`), whose select lists come from the models; no ORM instance is read or built.

`read` is the one read of a session's memory (the session row, its state, L2, L1 and the
promoted messages) in one statement.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import asyncpg

from app.core.pg import dumps
from app.memory.policy import DEFAULT_L1_MAX_MESSAGES
from app.models.base import new_id
from app.models.memory_snapshot import SNAPSHOT_ROW_COLUMNS, SnapshotRow
from app.models.memory_state import (
    L1_TOKENS_SQL,
    MEMORY_TOKENS_SQL,
    STATE_ROW_COLUMNS,
    StateRow,
)
from app.models.memory_summary import SUMMARY_ROW_COLUMNS, SummaryRow
from app.models.message import MESSAGE_ROW_COLUMNS, StoredMessage, message_row_sql
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
    Runs on either pool (`app.core.pg`: the same JSON codecs)."""
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


_SET_COMPRESSED = """
UPDATE memory_states SET l2_tokens = $3, l1_start_seq = coalesce($4, l1_start_seq),
       swapped_tokens = coalesce($5, swapped_tokens), version = version + 1, updated_at = now()
WHERE tenant_id = $1 AND session_id = $2
"""


async def set_compressed(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    l2_tokens: int,
    l1_start_seq: int | None = None,
    swapped_tokens: int | None = None,
) -> None:
    """Store a compression round in a state row the caller has locked: L2's tokens and, when
    L1 moved, its new start and the tokens now swapped out; a new `version`."""
    await conn.execute(
        _SET_COMPRESSED, tenant_id, session_id, l2_tokens, l1_start_seq, swapped_tokens
    )


_SET_PROMOTED = """
UPDATE memory_states SET promoted_seqs = $3, promoted_tokens = $4, version = version + 1,
       updated_at = now()
WHERE tenant_id = $1 AND session_id = $2
"""


async def set_promoted(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    promoted_seqs: Sequence[int],
    promoted_tokens: int,
) -> None:
    """Store the promoted messages of a state row the caller has locked; a new `version`."""
    await conn.execute(
        _SET_PROMOTED, tenant_id, session_id, dumps(list(promoted_seqs)), promoted_tokens
    )


_INSERT_STATE = """
INSERT INTO memory_states (tenant_id, session_id, rom, rom_text, rom_tokens, kernel,
                           promoted_seqs)
VALUES ($1, $2, $3, $4, $5, $6, $7)
"""


async def insert_state(
    conn: asyncpg.Connection,
    *,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    rom: dict[str, Any],
    rom_text: str,
    rom_tokens: int,
    kernel: dict[str, Any],
    promoted_seqs: Sequence[int] = (),
) -> None:
    """The state of a new session (its frozen ROM and first Kernel); the counters start at
    0, L1 at seq 1."""
    await conn.execute(
        _INSERT_STATE,
        tenant_id,
        session_id,
        dumps(rom),
        rom_text,
        rom_tokens,
        dumps(kernel),
        dumps(list(promoted_seqs)),
    )


# Promotion reads single messages as `StoredMessage` rows, like `read`.
_MESSAGES_BY_SEQS = f"""
SELECT {message_row_sql()} FROM messages
WHERE tenant_id = $1 AND session_id = $2 AND seq = ANY($3::bigint[])
ORDER BY seq
"""


async def messages_by_seqs(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID, seqs: Sequence[int]
) -> list[StoredMessage]:
    if not seqs:
        return []
    rows = await conn.fetch(_MESSAGES_BY_SEQS, tenant_id, session_id, list(seqs))
    return [StoredMessage(*r) for r in rows]


# a message issued a call when its `tool_calls` contains `[{"id": <call id>}]`
_TOOL_PARTNERS = f"""
SELECT {message_row_sql()} FROM messages
WHERE tenant_id = $1 AND session_id = $2
  AND (tool_use_id = ANY($3::text[])
       OR tool_calls @> ANY(ARRAY(SELECT jsonb_build_array(jsonb_build_object('id', c))
                                  FROM unnest($3::text[]) AS c)))
ORDER BY seq
"""


async def tool_partners(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    call_ids: Sequence[str],
) -> list[StoredMessage]:
    """Messages that issued or answered any of ``call_ids`` (to promote whole groups)."""
    if not call_ids:
        return []
    rows = await conn.fetch(_TOOL_PARTNERS, tenant_id, session_id, list(call_ids))
    return [StoredMessage(*r) for r in rows]


_ADD_SUMMARIES = """
INSERT INTO memory_summaries
  (id, tenant_id, session_id, start_seq, end_seq, text, method, token_count)
SELECT u.id, $1, $2, u.start_seq, u.end_seq, u.text, u.method, u.token_count
FROM unnest($3::uuid[], $4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::int[])
  AS u(id, start_seq, end_seq, text, method, token_count)
"""


async def add_summaries(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    rows: Sequence[SummaryRow],
) -> None:
    """Write summaries to the session's L2, in one statement."""
    if not rows:
        return
    await conn.execute(
        _ADD_SUMMARIES,
        tenant_id,
        session_id,
        [uuid.UUID(r.id) for r in rows],
        [r.start_seq for r in rows],
        [r.end_seq for r in rows],
        [r.text for r in rows],
        [r.method for r in rows],
        [r.token_count for r in rows],
    )


_INSERT_SNAPSHOT = """
INSERT INTO memory_snapshots (id, tenant_id, session_id, snapshot_type, content, token_count,
                              summary_count, start_seq, end_seq)
VALUES ($3, $1, $2, 'l2_summary', $4, $5, $6, $7, $8)
"""
_ARCHIVE_SUMMARIES = """
UPDATE memory_summaries SET snapshot_id = $3
WHERE tenant_id = $1 AND session_id = $2 AND id = ANY($4::uuid[])
"""


async def archive(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    members: Sequence[SummaryRow],
) -> None:
    """Write an L2 snapshot of `members` (summaries of L2, oldest first) and move them out
    of L2."""
    snapshot_id = new_id()
    await conn.execute(
        _INSERT_SNAPSHOT,
        tenant_id,
        session_id,
        snapshot_id,
        "\n\n".join(m.text for m in members),
        sum(m.token_count for m in members),
        len(members),
        members[0].start_seq,
        members[-1].end_seq,
    )
    await conn.execute(
        _ARCHIVE_SUMMARIES, tenant_id, session_id, snapshot_id, [uuid.UUID(m.id) for m in members]
    )


_SNAPSHOTS_PAGE = f"""
SELECT {", ".join(SNAPSHOT_ROW_COLUMNS)} FROM memory_snapshots
WHERE tenant_id = $1 AND session_id = $2 AND ($3::bigint IS NULL OR start_seq < $3)
ORDER BY start_seq DESC LIMIT $4
"""


async def snapshots_page(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    before_start: int | None,
    limit: int,
) -> list[SnapshotRow]:
    """Newest first (by covered range), cursor = the last row's ``start_seq``."""
    rows = await conn.fetch(_SNAPSHOTS_PAGE, tenant_id, session_id, before_start, limit)
    return [SnapshotRow._make(r) for r in rows]


_SNAPSHOT_COUNT = """
SELECT count(*) FROM memory_snapshots WHERE tenant_id = $1 AND session_id = $2
"""


async def snapshot_count(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> int:
    return int(await conn.fetchval(_SNAPSHOT_COUNT, tenant_id, session_id))


_MEMORY_TOKENS = f"""
SELECT {MEMORY_TOKENS_SQL}
FROM sessions s JOIN memory_states m ON m.tenant_id = $1 AND m.session_id = $2
WHERE s.tenant_id = $1 AND s.id = $2
"""


async def memory_tokens(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> int | None:
    """The session's stored memory tokens (ROM + Kernel + L2 + promoted + L1) from the
    counters, as the append and the jobs read them; None without a memory state."""
    value = await conn.fetchval(_MEMORY_TOKENS, tenant_id, session_id)
    return None if value is None else int(value)


class LayerCounters(NamedTuple):
    """A session's stored tokens per layer (`layer_counters`)."""

    rom_tokens: int
    kernel_tokens: int
    l2_tokens: int
    promoted_tokens: int
    l1_tokens: int


_LAYER_COUNTERS = f"""
SELECT m.session_id, m.rom_tokens, m.kernel_tokens, m.l2_tokens, m.promoted_tokens,
       GREATEST(0, {L1_TOKENS_SQL}) AS l1_tokens
FROM memory_states m JOIN sessions s ON s.tenant_id = $1 AND s.id = m.session_id
WHERE m.tenant_id = $1 AND m.session_id = ANY($2::uuid[])
"""


async def layer_counters(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, LayerCounters]:
    """The stored tokens per layer of some sessions of one tenant (a page of the session
    list), by session id; sessions without a memory state are left out."""
    if not session_ids:
        return {}
    rows = await conn.fetch(_LAYER_COUNTERS, tenant_id, list(session_ids))
    return {r[0]: LayerCounters(*(int(v) for v in r[1:])) for r in rows}
