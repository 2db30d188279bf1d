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


class MemorySnapshot(SQLModel, table=True):
    """An L2 written to swap when it exceeded ``max_l2_tokens`` (then L2 was cleared)."""

    __tablename__ = "memory_snapshots"
    __table_args__ = (
        tenant_pk("memory_snapshots", "id"),
        session_fk("memory_snapshots"),
        sa.Index("ix_memory_snapshots_session_created", "session_id", "created_at"),
    )

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    session_id: uuid.UUID = Field(sa_column=sa.Column(sa.Uuid, nullable=False))
    snapshot_type: str = Field(
        default="l2_summary", sa_column=sa.Column(sa.String(32), nullable=False)
    )
    content: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    token_count: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    summary_count: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    start_seq: int = Field(sa_column=sa.Column(sa.BigInteger, nullable=False))
    end_seq: int = Field(sa_column=sa.Column(sa.BigInteger, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())


class SnapshotRow(NamedTuple):
    """An archived L2 as the snapshot list reads it (`app.memory.repository.snapshots_page`):
    plain and immutable."""

    id: uuid.UUID
    start_seq: int
    end_seq: int
    content: str
    token_count: int
    summary_count: int
    created_at: datetime


SNAPSHOT_ROW_COLUMNS = row_columns(SnapshotRow._fields, MemorySnapshot)
