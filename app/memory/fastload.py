"""One round trip for everything a context build reads: the session row, its memory
state, L2, the L1 window and promoted messages, as JSON from a single statement.

This is the hot path of the service (SPEC: context build p50 <= 1 ms). It runs as a prepared
statement on the hot paths' asyncpg pool (`app.core.pg`), skipping ORM and statement
compilation; the rows become plain dataclasses with the attributes of the ORM models that
`app.memory.state.load` produces.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from app.auth.caller import Caller
from app.memory.policy import DEFAULT_L1_MAX_MESSAGES
from app.memory.state import (
    L1_WINDOW_EXTRA,
    L1_WINDOW_PER_MESSAGE,
    Loaded,
    memory_config,
    trim_window,
)
from app.models.message import MessageRow, StoredMessage, message_row_sql
from app.sessions.access import SessionNotFound, visible_session

_MSG = message_row_sql()

# the L1 window (app.memory.state.L1_WINDOW_*), over the session's config
_WINDOW = (f"({L1_WINDOW_PER_MESSAGE} * coalesce((s.config ->> 'l1_max_messages')::int, "
           f"{DEFAULT_L1_MAX_MESSAGES}) + {L1_WINDOW_EXTRA})")

_SQL = f"""
SELECT s.id, s.tenant_id, s.agent_id, s.config, s.metadata, s.last_seq, s.message_tokens,
  s.created_at, s.updated_at, s.user_id,
  st.session_id IS NOT NULL AS has_state, st.version, st.l1_start_seq, st.rom, st.rom_text,
  st.rom_tokens, st.kernel, st.kernel_tokens, st.promoted_seqs, st.promoted_tokens,
  st.l2_tokens, st.updated_at AS state_updated_at,
  (SELECT coalesce(json_agg(x ORDER BY x.start_seq), '[]')
     FROM (SELECT id, start_seq, end_seq, text, method, token_count FROM memory_summaries
           WHERE tenant_id = $1 AND session_id = $2 AND snapshot_id IS NULL) x) AS l2,
  (SELECT coalesce(json_agg(y ORDER BY y.seq), '[]')
     FROM (SELECT {_MSG} FROM messages
           WHERE tenant_id = $1 AND session_id = $2
             AND seq >= GREATEST(st.l1_start_seq, LEAST(s.last_seq - {_WINDOW} + 1,
                   (SELECT u.seq FROM messages u WHERE u.tenant_id = $1
                      AND u.session_id = $2 AND u.seq >= st.l1_start_seq
                      AND u.role = 'user' ORDER BY u.seq DESC LIMIT 1)))) y) AS l1,
  (SELECT coalesce(json_agg(z ORDER BY z.seq), '[]')
     FROM (SELECT {_MSG} FROM messages
           WHERE tenant_id = $1 AND session_id = $2
             AND seq = ANY(ARRAY(SELECT jsonb_array_elements_text(st.promoted_seqs)::bigint))
          ) z) AS promoted
FROM sessions s LEFT JOIN memory_states st ON st.session_id = s.id AND st.tenant_id = $1
WHERE s.tenant_id = $1 AND s.id = $2 AND s.erasure_id IS NULL
"""


@dataclass(slots=True)
class SessionRow:
    """A session as a context build reads it (the `Session` columns, no ORM instance)."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    agent_id: str
    config: dict[str, Any]
    meta: dict[str, Any]
    last_seq: int
    message_tokens: int
    created_at: datetime
    updated_at: datetime
    user_id: str | None = None


@dataclass(slots=True)
class StateRow:
    """A memory state as a context build reads it (the `MemoryState` columns)."""

    session_id: uuid.UUID
    tenant_id: uuid.UUID
    version: int
    l1_start_seq: int
    rom: dict[str, Any]
    rom_text: str
    rom_tokens: int
    kernel: dict[str, Any]
    kernel_tokens: int
    promoted_seqs: list[int]
    promoted_tokens: int
    l2_tokens: int
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class SummaryRow:
    """An L2 summary decoded from the statement's JSON (its id kept as the text it came as:
    the policy and the builder key summaries by that text)."""

    id: str
    start_seq: int
    end_seq: int
    text: str
    method: str
    token_count: int


def _rows(items: list[dict[str, Any]]) -> list[MessageRow]:
    return [StoredMessage(**i) for i in items]


async def load_for_context(conn: asyncpg.Connection, caller: Caller, session_id: uuid.UUID
                           ) -> tuple[SessionRow, Loaded] | None:
    """The caller's session and its memory (L1 limited to the builder's window, see
    `app.memory.state.L1_WINDOW_PER_MESSAGE`, plus the current turn); None when the session
    has no memory state yet. 404 when it is not the caller's."""
    row = await conn.fetchrow(_SQL, caller.tenant_id, session_id)
    if row is None:
        raise SessionNotFound()
    session = SessionRow(row["id"], row["tenant_id"], row["agent_id"], row["config"],
                         row["metadata"], row["last_seq"], row["message_tokens"],
                         row["created_at"], row["updated_at"], row["user_id"])
    visible_session(caller, session)
    if not row["has_state"]:
        return None
    state = StateRow(row["id"], row["tenant_id"], row["version"], row["l1_start_seq"],
                     row["rom"], row["rom_text"], row["rom_tokens"], row["kernel"],
                     row["kernel_tokens"], row["promoted_seqs"], row["promoted_tokens"],
                     row["l2_tokens"], row["state_updated_at"])
    l1, gap = trim_window(_rows(row["l1"]), state.l1_start_seq, session.last_seq)
    l2 = [SummaryRow(x["id"], x["start_seq"], x["end_seq"], x["text"], x["method"],
                     x["token_count"]) for x in row["l2"]]
    loaded = Loaded(session=session, state=state, cfg=memory_config(session), l1=l1, l2=l2,
                    promoted=_rows(row["promoted"]), gap=gap)
    return session, loaded
