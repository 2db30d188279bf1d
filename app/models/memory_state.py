import uuid
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

from app.models.base import (
    counter_column,
    row_columns,
    session_fk,
    tenant_key,
    tenant_pk,
    ts_column,
    utcnow,
)


class MemoryState(SQLModel, table=True):
    """A session's segmented-memory state: one row per session.

    ROM (frozen at creation) and the Kernel live here so a context build reads one row;
    L1 is every message with ``seq >= l1_start_seq``; L2 is the session's summaries not
    yet archived in a snapshot. ``version`` moves on every change and guards
    ``apply_compression`` against plans made from an older state (optimistic
    concurrency); writers also take the row lock, so no update is lost across processes.
    """

    __tablename__ = "memory_states"
    __table_args__ = (tenant_pk("memory_states", "session_id"), session_fk("memory_states"))

    session_id: uuid.UUID = Field(sa_column=sa.Column(sa.Uuid, primary_key=True))
    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    version: int = Field(default=0, sa_column=counter_column(big=True))
    l1_start_seq: int = Field(
        default=1, sa_column=sa.Column(sa.BigInteger, nullable=False, server_default="1")
    )
    # tokens of the messages before l1_start_seq (moved with it, by compression): L1 holds
    # sessions.message_tokens - swapped_tokens, read by the append's pressure check
    swapped_tokens: int = Field(default=0, sa_column=counter_column(big=True))
    rom: dict[str, Any] = Field(default_factory=dict, sa_column=sa.Column(JSONB, nullable=False))
    rom_text: str = Field(
        default="", sa_column=sa.Column(sa.Text, nullable=False, server_default="")
    )
    rom_tokens: int = Field(default=0, sa_column=counter_column())
    kernel: dict[str, Any] = Field(default_factory=dict, sa_column=sa.Column(JSONB, nullable=False))
    kernel_tokens: int = Field(default=0, sa_column=counter_column())
    promoted_seqs: list[int] = Field(
        default_factory=list, sa_column=sa.Column(JSONB, nullable=False)
    )
    promoted_tokens: int = Field(default=0, sa_column=counter_column())
    l2_tokens: int = Field(default=0, sa_column=counter_column())
    updated_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())


class StateRow(NamedTuple):
    """A memory state as the memory read takes it (`app.memory.repository.read`): every
    column of `MemoryState`, plain and immutable; writers change it through the repository's
    updates, never by assignment."""

    session_id: uuid.UUID
    tenant_id: uuid.UUID
    version: int
    l1_start_seq: int
    swapped_tokens: int
    rom: dict[str, Any]
    rom_text: str
    rom_tokens: int
    kernel: dict[str, Any]
    kernel_tokens: int
    promoted_seqs: list[int]
    promoted_tokens: int
    l2_tokens: int
    updated_at: datetime


STATE_ROW_COLUMNS = row_columns(StateRow._fields, MemoryState)


# A session's memory tokens and pressure from the stored counters, as SQL over a session `s`
# (the `sessions` columns), its state `m` and its compression job `j`: the one definition the
# append (`app.messages.repository`), the jobs (`app.jobs.repository`) and the memory's own
# reads share. L1 holds the tokens of the messages after the swapped ones: compression moves
# `swapped_tokens` with `l1_start_seq`, the append adds to `sessions.message_tokens`.
FIXED_TOKENS_SQL = "m.rom_tokens + m.kernel_tokens + m.l2_tokens + m.promoted_tokens"
L1_TOKENS_SQL = "s.message_tokens - m.swapped_tokens"
L1_COUNT_SQL = "s.last_seq - m.l1_start_seq + 1"
MEMORY_TOKENS_SQL = f"{FIXED_TOKENS_SQL} + {L1_TOKENS_SQL}"
# what `app.memory.pressure.pressure_from_row` reads
PRESSURE_SQL = (
    f"s.config, s.last_seq, m.l1_start_seq, {FIXED_TOKENS_SQL} AS fixed_tokens, "
    f"{L1_TOKENS_SQL} AS l1_tokens, j.status AS job_status"
)
