import uuid
from datetime import datetime
from typing import NamedTuple

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from app.models.base import (
    new_id,
    row_columns,
    session_fk,
    tenant_key,
    tenant_pk,
    ts_column,
    utcnow,
)


class MemorySummary(SQLModel, table=True):
    """A summary standing for messages ``start_seq..end_seq`` of a session.

    In L2 while ``snapshot_id`` is null; archived in a snapshot afterwards. A seq is
    summarised once in a session's life, so ``(tenant_id, session_id, start_seq)`` is unique: a
    retried job can never write a second summary for the same range.
    """

    __tablename__ = "memory_summaries"
    __table_args__ = (
        tenant_pk("memory_summaries", "id"),
        session_fk("memory_summaries"),
        # a deleted snapshot nulls only snapshot_id (PostgreSQL 15), never tenant_id
        sa.ForeignKeyConstraint(
            ["tenant_id", "snapshot_id"],
            ["memory_snapshots.tenant_id", "memory_snapshots.id"],
            ondelete="SET NULL (snapshot_id)",
            name="fk_memory_summaries_snapshot_id_memory_snapshots",
        ),
        sa.UniqueConstraint(
            "tenant_id", "session_id", "start_seq", name="uq_memory_summaries_session_start"
        ),
        sa.Index("ix_memory_summaries_snapshot_id", "tenant_id", "snapshot_id"),
        # L2 (not yet archived) of one session, read by every context build
        sa.Index(
            "ix_memory_summaries_l2",
            "session_id",
            "start_seq",
            postgresql_where=sa.text("snapshot_id IS NULL"),
        ),
    )

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    session_id: uuid.UUID = Field(sa_column=sa.Column(sa.Uuid, nullable=False))
    start_seq: int = Field(sa_column=sa.Column(sa.BigInteger, nullable=False))
    end_seq: int = Field(sa_column=sa.Column(sa.BigInteger, nullable=False))
    text: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    method: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    token_count: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    snapshot_id: uuid.UUID | None = Field(default=None, sa_column=sa.Column(sa.Uuid))
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())


class SummaryRow(NamedTuple):
    """An L2 summary as the memory read takes it: plain and immutable. Its id stays the
    text the read's JSON carries (the policy and the builder key summaries by that text)."""

    id: str
    start_seq: int
    end_seq: int
    text: str
    method: str
    token_count: int


SUMMARY_ROW_COLUMNS = row_columns(SummaryRow._fields, MemorySummary)
