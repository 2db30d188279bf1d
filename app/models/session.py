import uuid
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

from app.models.base import (
    counter_column,
    new_id,
    row_columns,
    tenant_key,
    tenant_pk,
    ts_column,
    utcnow,
)


class Session(SQLModel, table=True):
    """One conversation of one agent."""

    __tablename__ = "sessions"
    __table_args__ = (
        tenant_pk("sessions", "id"),
        sa.Index("ix_sessions_tenant_agent_created", "tenant_id", "agent_id", "created_at"),
        sa.Index(
            "ix_sessions_tenant_user_created",
            "tenant_id",
            "user_id",
            "created_at",
            postgresql_where=sa.text("user_id IS NOT NULL"),
        ),
        sa.Index(
            "ix_sessions_tenant_erasure",
            "tenant_id",
            "erasure_id",
            postgresql_where=sa.text("erasure_id IS NOT NULL"),
        ),
        sa.CheckConstraint("status IN ('active', 'ended')", name="status"),
    )

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    agent_id: str = Field(sa_column=sa.Column(sa.String(200), nullable=False))
    # The person the session is with (opaque, validated like agent ids).
    user_id: str | None = Field(default=None, sa_column=sa.Column(sa.String(200)))
    # The tombstone: set when an erasure takes the session; from then on it reads as
    # deleted everywhere, and its rows go in batches (app.erasure).
    erasure_id: uuid.UUID | None = Field(default=None, sa_column=sa.Column(sa.Uuid))
    config: dict[str, Any] = Field(
        default_factory=dict,
        sa_column=sa.Column(JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
    )
    meta: dict[str, Any] = Field(
        default_factory=dict,
        sa_column=sa.Column(
            "metadata", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")
        ),
    )
    # `active`, or `ended` (ending flushes the fact extraction; an append reopens)
    status: str = Field(
        default="active",
        sa_column=sa.Column(sa.String(16), nullable=False, server_default="active"),
    )
    ended_at: datetime | None = Field(default=None, sa_column=sa.Column(sa.DateTime(timezone=True)))
    # Highest seq handed out; bumped under the row lock so seqs stay gap-free and unique.
    last_seq: int = Field(default=0, sa_column=counter_column(big=True))
    message_tokens: int = Field(default=0, sa_column=counter_column(big=True))
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    updated_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())


class SessionRow(NamedTuple):
    """A session as every reader takes it: plain and immutable, `Session`'s attribute names,
    every column but the erasure tombstone (reads leave sessions under erasure out). The
    select list comes from the model (`SESSION_ROW_COLUMNS`); `app.sessions.repository`
    reads and writes the table with it, and the memory read (`app.memory.repository.read`)
    selects it beside the state."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    agent_id: str
    user_id: str | None
    config: dict[str, Any]
    meta: dict[str, Any]
    status: str
    ended_at: datetime | None
    last_seq: int
    message_tokens: int
    created_at: datetime
    updated_at: datetime


SESSION_ROW_COLUMNS = row_columns(SessionRow._fields, Session)
