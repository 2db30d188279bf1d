import uuid
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

from app.models.base import (
    new_id,
    optional_ts_column,
    row_columns,
    tenant_key,
    tenant_pk,
    ts_column,
    utcnow,
)


class Erasure(SQLModel, table=True):
    """One erasure: the receipt while it runs and the audit row afterwards.

    `subject` (the raw user, session or agent id) is kept only while the erasure runs: the
    runner needs it, and the write guards of migration 0016 match it. When the erasure
    completes it is cleared (a check constraint holds that), leaving `subject_hash`, a keyed
    hash (`app.erasure.policy.subject_hash`): who asked, when, what kind, the counts, and a
    way to answer "was X erased?" for someone who knows X. No content is ever stored here.
    """

    __tablename__ = "erasures"
    __table_args__ = (
        tenant_pk("erasures", "id"),
        sa.CheckConstraint("kind IN ('user', 'session', 'agent')", name="kind"),
        sa.CheckConstraint("status IN ('running', 'completed')", name="status"),
        sa.CheckConstraint("status = 'running' OR subject IS NULL", name="no_subject_kept"),
        sa.Index("ix_erasures_tenant_hash", "tenant_id", "subject_hash"),
        sa.Index(
            "ix_erasures_running",
            "tenant_id",
            "kind",
            "subject",
            postgresql_where=sa.text("status = 'running'"),
        ),
        # the recovery sweep, across tenants (app.erasure.tasks)
        sa.Index("ix_erasures_status_updated", "status", "updated_at"),
    )

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    kind: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    subject: str | None = Field(default=None, sa_column=sa.Column(sa.String(200)))
    subject_hash: str = Field(sa_column=sa.Column(sa.String(64), nullable=False))
    status: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    requested_by: uuid.UUID | None = Field(default=None, sa_column=sa.Column(sa.Uuid))
    requested_role: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    counts: dict[str, Any] = Field(
        default_factory=dict,
        sa_column=sa.Column(JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
    )
    started_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    finished_at: datetime | None = Field(default=None, sa_column=optional_ts_column())
    updated_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())


class ErasureRow(NamedTuple):
    """An erasure as its readers take it (`app.erasure.repository`): plain and immutable,
    `Erasure`'s attribute names; the select list comes from the model
    (`ERASURE_ROW_COLUMNS`)."""

    tenant_id: uuid.UUID
    id: uuid.UUID
    kind: str
    subject: str | None
    status: str
    counts: dict[str, Any]
    started_at: datetime
    finished_at: datetime | None
    requested_by: uuid.UUID | None


ERASURE_ROW_COLUMNS = row_columns(ErasureRow._fields, Erasure)
