"""One round trip for everything a context build reads: the session row, its memory
state, L2, the L1 window and promoted messages, as JSON from a single statement.

This is the hot path of the service (SPEC: context build p50 <= 1 ms). It runs on the
asyncpg connection under the request's SQLAlchemy session, skipping ORM and statement
compilation; the rows become the same shapes `app.memory.state.load` produces.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.caller import Caller
from app.memory.policy import DEFAULT_L1_MAX_MESSAGES
from app.memory.state import (
    L1_WINDOW_EXTRA,
    L1_WINDOW_PER_MESSAGE,
    Loaded,
    memory_config,
    trim_window,
)
from app.models import Session
from app.models.memory import MemoryState
from app.models.message import MessageRow, message_row_sql
from app.sessions.access import SessionNotFound, visible_session

_MSG = message_row_sql()

# the L1 window (app.memory.state.L1_WINDOW_*), over the session's config
_WINDOW = (f"({L1_WINDOW_PER_MESSAGE} * coalesce((s.config ->> 'l1_max_messages')::int, "
           f"{DEFAULT_L1_MAX_MESSAGES}) + {L1_WINDOW_EXTRA})")

_SQL = f"""
SELECT row_to_json(s) AS session, row_to_json(st) AS state,
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
WHERE s.tenant_id = $1 AND s.id = $2
"""


def _j(v: Any) -> Any:
    # SQLAlchemy's asyncpg dialect installs JSON codecs on its connections; a bare
    # connection returns text
    return json.loads(v) if isinstance(v, (str, bytes)) else v


def _ts(v: Any) -> Any:
    return datetime.fromisoformat(v) if isinstance(v, str) else v


def _session(d: dict[str, Any]) -> Session:
    return Session(id=uuid.UUID(d["id"]), tenant_id=uuid.UUID(d["tenant_id"]),
                   agent_id=d["agent_id"], config=d["config"], meta=d["metadata"],
                   last_seq=d["last_seq"], message_tokens=d["message_tokens"],
                   created_at=_ts(d["created_at"]), updated_at=_ts(d["updated_at"]))


def _state(d: dict[str, Any]) -> MemoryState:
    return MemoryState(session_id=uuid.UUID(d["session_id"]),
                       tenant_id=uuid.UUID(d["tenant_id"]), version=d["version"],
                       l1_start_seq=d["l1_start_seq"], rom=d["rom"], rom_text=d["rom_text"],
                       rom_tokens=d["rom_tokens"], kernel=d["kernel"],
                       kernel_tokens=d["kernel_tokens"], promoted_seqs=d["promoted_seqs"],
                       promoted_tokens=d["promoted_tokens"], l2_tokens=d["l2_tokens"],
                       updated_at=_ts(d["updated_at"]))


@dataclass(frozen=True, slots=True)
class _Message:
    """A `MessageRow` decoded from the statement's JSON (`MESSAGE_ROW_COLUMNS`)."""

    session_id: str
    seq: int
    role: str
    content: Any
    tool_calls: list[dict[str, Any]] | None
    tool_use_id: str | None
    is_error: bool
    name: str | None
    token_count: int
    meta: dict[str, Any]
    created_at: str


def _rows(items: list[dict[str, Any]]) -> list[MessageRow]:
    return [_Message(**i) for i in items]


async def raw_connection(db: AsyncSession) -> Any:
    conn = await db.connection()
    raw = await conn.get_raw_connection()
    return raw.driver_connection


async def load_for_context(db: AsyncSession, caller: Caller,
                           session_id: uuid.UUID) -> tuple[Session, Loaded] | None:
    """The caller's session and its memory (L1 limited to the builder's window, see
    `app.memory.state.L1_WINDOW_PER_MESSAGE`, plus the current turn); None when the session has no
    memory state yet. 404 when it is not the caller's."""
    pg = await raw_connection(db)
    row = await pg.fetchrow(_SQL, caller.tenant_id, session_id)
    if row is None:
        raise SessionNotFound()
    session = visible_session(caller, _session(_j(row["session"])))
    if row["state"] is None:
        return None
    state = _state(_j(row["state"]))
    l1, gap = trim_window(_rows(_j(row["l1"])), state.l1_start_seq, session.last_seq)
    l2 = [SimpleNamespace(**{**s, "id": uuid.UUID(s["id"])}) for s in _j(row["l2"])]
    loaded = Loaded(session=session, state=state, cfg=memory_config(session), l1=l1, l2=l2,
                    promoted=_rows(_j(row["promoted"])), gap=gap)
    return session, loaded
