"""A session's memory as the policy and the builder take it (`Loaded`), from the one read
of it (`app.memory.repository.read`): `load`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import asyncpg

from app.auth.caller import Caller
from app.core.session_lru import SessionLRU
from app.memory import repository
from app.memory.heuristic_summariser import SummaryDraft, count_tokens, heuristic_summary
from app.memory.policy import Layers, MemoryConfig, MessageRecord, SummaryRecord
from app.memory.repository import ALL_L1, CONTEXT, Window
from app.models.memory_state import StateRow
from app.models.memory_summary import SummaryRow
from app.models.message import StoredMessage
from app.models.session import SessionRow
from app.sessions.access import SessionNotFound, visible_session


class _Configured(Protocol):
    @property
    def config(self) -> dict[str, Any]: ...


def memory_config(session_row: _Configured) -> MemoryConfig:
    """The policy config of a session (defaults and derived values: `MemoryConfig`)."""
    return MemoryConfig.from_stored(session_row.config)


def canonical(m: StoredMessage) -> dict[str, Any]:
    """The canonical dict of a stored message (what summarisers and renderers take)."""
    return {
        "seq": m.seq,
        "role": m.role,
        "content": m.content,
        "tool_calls": m.tool_calls,
        "tool_use_id": m.tool_use_id,
        "is_error": m.is_error,
        "name": m.name,
        "metadata": m.meta or {},
    }


def record(m: StoredMessage) -> MessageRecord:
    """The policy's record of a message (built positionally: a context build makes one per
    message). A truncated message keeps a marker, its tool names and empty inputs: its
    floor is 32 tokens and 6 per call."""
    calls = m.tool_calls or ()
    tool = m.role == "tool"
    return MessageRecord(
        m.seq,
        m.role,
        m.token_count,
        tuple(str(c["id"]) for c in calls) if calls else (),
        (m.tool_use_id,) if tool and m.tool_use_id else (),
        bool(m.content) and not tool,
        False,
        min(m.token_count, 32 + 6 * len(calls)),
    )


def summary_record(s: SummaryRow) -> SummaryRecord:
    return SummaryRecord(
        start_seq=s.start_seq, end_seq=s.end_seq, token_count=s.token_count, key=str(s.id)
    )


GAP_KEY = "gap"


def gap_draft(start_seq: int, end_seq: int) -> SummaryDraft:
    """A pointer to messages not yet summarised, whose content was not loaded."""

    n = end_seq - start_seq + 1
    text = (
        f"[msg:{start_seq}-{end_seq}: {n} earlier messages are not summarised yet. "
        f"They are in swap: recall them with recall_conversation (offset "
        f"{start_seq - 1}) or search_conversation.] covers msg:{start_seq}-{end_seq}"
    )
    return SummaryDraft(
        start_seq=start_seq,
        end_seq=end_seq,
        text=text,
        method="pending",
        token_count=count_tokens(text),
    )


def trim_window(
    l1: list[StoredMessage], l1_start_seq: int, last_seq: int
) -> tuple[list[StoredMessage], SummaryDraft | None]:
    """A window of L1 without leading tool results (their call was not loaded), and the
    pointer standing for everything older that it leaves out."""
    while l1 and l1[0].role == "tool":
        l1.pop(0)
    first = l1[0].seq if l1 else last_seq + 1
    return l1, gap_draft(l1_start_seq, first - 1) if first > l1_start_seq else None


STAND_IN_CACHE_ENTRIES = 4096


class StandIns(SessionLRU[SummaryDraft]):
    """Stand-ins (heuristic summaries of L1 overflow) by (tenant, session, seqs), least
    recently used dropped first: one per process, owned by its lifespan state
    (`app.state.Caches`), forgotten for erased sessions (`forget`)."""

    def __init__(self, size: int = STAND_IN_CACHE_ENTRIES) -> None:
        super().__init__(size)


@dataclass
class Loaded:
    """Everything the policy and the builder need about one session's memory."""

    session: SessionRow
    state: StateRow
    cfg: MemoryConfig
    l1: list[StoredMessage]
    l2: list[SummaryRow]
    promoted: list[StoredMessage]
    # Older L1 messages that were not loaded (a backlog no job has compressed yet):
    # shown as one fixed-size pointer into swap instead of their content.
    gap: SummaryDraft | None = None
    # the process's stand-ins (`StandIns`), shared across loads; None: this load's only
    stand_ins: StandIns | None = None
    _drafts: dict[tuple[int, int], SummaryDraft] = field(default_factory=dict)
    _layers: Layers | None = None

    @property
    def layers(self) -> Layers:
        if self._layers is None:
            self._layers = self._make_layers()
        return self._layers

    def _make_layers(self) -> Layers:
        l2 = tuple(map(summary_record, self.l2))
        if self.gap is not None:
            l2 += (
                SummaryRecord(
                    start_seq=self.gap.start_seq,
                    end_seq=self.gap.end_seq,
                    token_count=self.gap.token_count,
                    key=GAP_KEY,
                ),
            )
        return Layers(
            rom_tokens=self.state.rom_tokens,
            kernel_tokens=self.state.kernel_tokens,
            l2=l2,
            promoted=tuple(map(record, self.promoted)),
            l1=tuple(map(record, self.l1)),
        )

    def messages_for(self, seqs: Sequence[int]) -> list[dict[str, Any]]:
        wanted = set(seqs)
        return [canonical(m) for m in self.l1 if m.seq in wanted]

    def stand_in(self, records: Sequence[MessageRecord]) -> SummaryDraft:
        """Heuristic summary of L1 records, cached for this load and, with `stand_ins`,
        across loads (messages never change once stored, so a session's stand-in for the
        same seqs is the same: context builds between two compressions stop re-summarising
        the same overflow)."""
        key = (records[0].seq, records[-1].seq)
        if key not in self._drafts:
            seqs = tuple(r.seq for r in records)
            shared = (self.session.tenant_id, self.session.id, seqs)
            draft = self.stand_ins.get(shared) if self.stand_ins is not None else None
            if draft is None:
                draft = heuristic_summary(self.messages_for(list(seqs)))
                if self.stand_ins is not None:
                    self.stand_ins.put(shared, draft)
            self._drafts[key] = draft
        return self._drafts[key]

    def stand_in_tokens(self, records: Sequence[MessageRecord]) -> int:
        return self.stand_in(records).token_count


async def load(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    window: Window = ALL_L1,
    lock: bool = False,
    caller: Caller | None = None,
    stand_ins: StandIns | None = None,
) -> Loaded:
    """A session's memory, in one read (`app.memory.repository.read`) on `conn`: the hot
    paths' pool's for a context build, the writer's transaction's for the writers.

    `window`: which L1 messages (`repository.CONTEXT` shows older backlog as one pointer
    into swap, `Loaded.gap`). `lock`: take the state row's lock first (writers; inside the
    transaction of `conn`). `caller`: 404 unless the caller may see the session, checked
    before anything is written. `stand_ins`: the process's (`app.state.Caches`), so builds
    between two compressions share their stand-ins. A session made before memory existed
    gets its empty ROM and Kernel here. 404 `session_not_found` when the tenant has no such session.
    """
    if lock and not await repository.lock_state(conn, tenant_id, session_id):
        await repository.ensure_state(conn, tenant_id, session_id)
        await repository.lock_state(conn, tenant_id, session_id)
    rows = await repository.read(conn, tenant_id, session_id, window)
    if rows is None:
        raise SessionNotFound()
    if caller is not None:
        visible_session(caller, rows.session)
    if rows.state is None:
        await repository.ensure_state(conn, tenant_id, session_id)
        rows = await repository.read(conn, tenant_id, session_id, window)
        if rows is None or rows.state is None:
            raise SessionNotFound()
    l1, gap = rows.l1, None
    if window == CONTEXT:
        l1, gap = trim_window(l1, rows.state.l1_start_seq, rows.session.last_seq)
    return Loaded(
        session=rows.session,
        state=rows.state,
        cfg=memory_config(rows.session),
        l1=l1,
        l2=rows.l2,
        promoted=rows.promoted,
        gap=gap,
        stand_ins=stand_ins,
    )
