import uuid
from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from app.models.base import session_fk, tenant_key, tenant_pk, ts_column, utcnow


class CompressionJob(SQLModel, table=True):
    """The latest background compression job of a session (one row per session).

    Written by the enqueue path (`pending`) and the worker (`running`, `succeeded`,
    `failed`); read by `GET /v1/sessions/{id}/memory`. Counters accumulate over the
    session's life.
    """

    __tablename__ = "compression_jobs"
    __table_args__ = (
        tenant_pk("compression_jobs", "session_id"),
        session_fk("compression_jobs"),
        sa.Index("ix_compression_jobs_status_updated", "status", "updated_at"),
    )

    session_id: uuid.UUID = Field(sa_column=sa.Column(sa.Uuid, primary_key=True))
    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    status: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    job_id: str | None = Field(default=None, sa_column=sa.Column(sa.String(200)))
    attempts: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )
    last_error: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    runs: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )
    summaries_written: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )
    tokens_saved: int = Field(
        default=0, sa_column=sa.Column(sa.BigInteger, nullable=False, server_default="0")
    )
    enqueued_at: datetime | None = Field(
        default=None, sa_column=sa.Column(sa.DateTime(timezone=True))
    )
    started_at: datetime | None = Field(
        default=None, sa_column=sa.Column(sa.DateTime(timezone=True))
    )
    finished_at: datetime | None = Field(
        default=None, sa_column=sa.Column(sa.DateTime(timezone=True))
    )
    updated_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
