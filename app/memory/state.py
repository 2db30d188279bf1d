"""Load a session's memory into policy records (one state row + L1/L2/promoted rows)."""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from app.memory import repository
from app.memory.policy import Layers, MemoryConfig, MessageRecord, SummaryRecord
from app.memory.summariser import SummaryDraft, count_tokens, heuristic_summary
from app.models import Session
from app.models.memory import MemoryState
from app.models.message import MessageRow
from app.sessions.access import SessionNotFound

if TYPE_CHECKING:
    from app.memory.fastload import SessionRow, StateRow


def memory_config(session_row: Session | SessionRow) -> MemoryConfig:
    """The policy config of a session (defaults and derived values: `MemoryConfig`)."""
    return MemoryConfig.from_stored(session_row.config)


def canonical(m: MessageRow) -> dict[str, Any]:
    """The canonical dict of a stored message (what summarisers and renderers take)."""
    return {"seq": m.seq, "role": m.role, "content": m.content, "tool_calls": m.tool_calls,
            "tool_use_id": m.tool_use_id, "is_error": m.is_error, "name": m.name,
            "metadata": m.meta or {}}


def record(m: MessageRow) -> MessageRecord:
    calls = m.tool_calls or []
    has_text = bool(m.content) and m.role != "tool"
    return MessageRecord(
        seq=m.seq, role=m.role, token_count=m.token_count,
        tool_use_ids=tuple(str(c["id"]) for c in calls),
        tool_result_ids=(m.tool_use_id,) if m.role == "tool" and m.tool_use_id else (),
        has_text=has_text,
        # a truncated message keeps a marker, its tool names and empty inputs
        min_tokens=min(m.token_count, 32 + 6 * len(calls)),
    )


class SummaryRow(Protocol):
    """An L2 summary as the policy and the builder read it: a `MemorySummary`, or the
    plain row of `app.memory.fastload` (same attribute names, no ORM instance)."""

    @property
    def id(self) -> uuid.UUID | str: ...
    @property
    def start_seq(self) -> int: ...
    @property
    def end_seq(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def token_count(self) -> int: ...


def summary_record(s: SummaryRow) -> SummaryRecord:
    return SummaryRecord(start_seq=s.start_seq, end_seq=s.end_seq, token_count=s.token_count,
                         key=str(s.id))


GAP_KEY = "gap"


def gap_draft(start_seq: int, end_seq: int) -> SummaryDraft:
    """A pointer to messages not yet summarised, whose content was not loaded."""

    n = end_seq - start_seq + 1
    text = (f"[msg:{start_seq}-{end_seq}: {n} earlier messages are not summarised yet. "
            f"They are in swap: recall them with recall_conversation (offset "
            f"{start_seq - 1}) or search_conversation.] covers msg:{start_seq}-{end_seq}")
    return SummaryDraft(start_seq=start_seq, end_seq=end_seq, text=text, method="pending",
                        token_count=count_tokens(text))


# A context build reads the newest L1_WINDOW_PER_MESSAGE * l1_max_messages +
# L1_WINDOW_EXTRA messages (plus the current turn): enough for the FIFO cap and the
# thresholds; older backlog becomes one pointer. The one read that applies it is the SQL
# of app/memory/fastload.py.
L1_WINDOW_PER_MESSAGE = 4
L1_WINDOW_EXTRA = 16


def trim_window(l1: list[MessageRow], l1_start_seq: int,
                last_seq: int) -> tuple[list[Any], SummaryDraft | None]:
    """A window of L1 without leading tool results (their call was not loaded), and the
    pointer standing for everything older that it leaves out."""
    while l1 and l1[0].role == "tool":
        l1.pop(0)
    first = l1[0].seq if l1 else last_seq + 1
    return l1, gap_draft(l1_start_seq, first - 1) if first > l1_start_seq else None


# Stand-ins (heuristic summaries of L1 overflow) by (session id, seqs), least recently used
# dropped first; per process.
STAND_IN_CACHE_ENTRIES = 4096
_STAND_INS: OrderedDict[tuple[str, tuple[int, ...]], SummaryDraft] = OrderedDict()


@dataclass
class Loaded:
    """Everything the policy and the builder need about one session's memory."""

    session: Session | SessionRow  # ORM rows for the writers, plain rows for context builds
    state: MemoryState | StateRow
    cfg: MemoryConfig
    l1: list[MessageRow]
    l2: Sequence[SummaryRow]
    promoted: list[MessageRow]
    # Older L1 messages that were not loaded (a backlog no job has compressed yet):
    # shown as one fixed-size pointer into swap instead of their content.
    gap: SummaryDraft | None = None
    _drafts: dict[tuple[int, int], SummaryDraft] = field(default_factory=dict)
    _layers: Layers | None = None

    @property
    def layers(self) -> Layers:
        if self._layers is None:
            self._layers = self._make_layers()
        return self._layers

    def _make_layers(self) -> Layers:
        l2 = tuple(summary_record(s) for s in self.l2)
        if self.gap is not None:
            l2 += (SummaryRecord(start_seq=self.gap.start_seq, end_seq=self.gap.end_seq,
                                 token_count=self.gap.token_count, key=GAP_KEY),)
        return Layers(
            rom_tokens=self.state.rom_tokens, kernel_tokens=self.state.kernel_tokens,
            l2=l2,
            promoted=tuple(record(m) for m in self.promoted),
            l1=tuple(record(m) for m in self.l1),
        )

    def messages_for(self, seqs: Sequence[int]) -> list[dict[str, Any]]:
        wanted = set(seqs)
        return [canonical(m) for m in self.l1 if m.seq in wanted]

    def stand_in(self, records: Sequence[MessageRecord]) -> SummaryDraft:
        """Heuristic summary of L1 records, cached for this load and across loads (messages
        never change once stored, so a session's stand-in for the same seqs is the same:
        context builds between two compressions stop re-summarising the same overflow)."""
        key = (records[0].seq, records[-1].seq)
        if key not in self._drafts:
            seqs = tuple(r.seq for r in records)
            shared = (str(self.session.id), seqs)
            draft = _STAND_INS.get(shared)
            if draft is None:
                draft = heuristic_summary(self.messages_for(list(seqs)))
                _STAND_INS[shared] = draft
                if len(_STAND_INS) > STAND_IN_CACHE_ENTRIES:
                    _STAND_INS.popitem(last=False)
            else:
                _STAND_INS.move_to_end(shared)
            self._drafts[key] = draft
        return self._drafts[key]

    def stand_in_tokens(self, records: Sequence[MessageRecord]) -> int:
        return self.stand_in(records).token_count


async def load(db: AsyncSession, session_row: Session, *, lock: bool = False,
               oldest: int | None = None) -> Loaded:
    """Read the state row (locked when writing) and the rows of L1, L2 and promoted, for
    the writers (compression, promotion). Context builds read through
    `app.memory.fastload`, which loads only the newest L1 window.

    With ``oldest``, a backlog longer than that loads only its oldest ``oldest`` messages:
    compression then works through a long backlog chunk by chunk (the policy protects the
    chunk's last user turn, so a chunk is only ever compressed up to an exchange boundary).
    """
    state = await repository.get_state(db, session_row.tenant_id, session_row.id, lock=lock)
    if state is None:
        # sessions made before memory existed get an empty ROM and Kernel
        await repository.ensure_state(db, session_row.tenant_id, session_row.id)
        state = await repository.get_state(db, session_row.tenant_id, session_row.id,
                                           lock=lock)
    if state is None:
        raise SessionNotFound()
    if oldest is not None and session_row.last_seq - state.l1_start_seq + 1 > oldest:
        l1 = await repository.messages_from(db, session_row.tenant_id, session_row.id,
                                            state.l1_start_seq, limit=oldest)
    else:
        l1 = await repository.messages_from(db, session_row.tenant_id, session_row.id,
                                            state.l1_start_seq)
    l2 = await repository.l2_summaries(db, session_row.tenant_id, session_row.id)
    promoted = await repository.messages_by_seqs(db, session_row.tenant_id, session_row.id,
                                                 list(state.promoted_seqs or []))
    return Loaded(session=session_row, state=state, cfg=memory_config(session_row), l1=l1,
                  l2=l2, promoted=promoted)
