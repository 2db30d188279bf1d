import uuid
from datetime import datetime
from typing import NamedTuple

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from app.models.base import (
    counter_column,
    optional_ts_column,
    row_columns,
    session_fk,
    tenant_key,
    tenant_pk,
    ts_column,
    utcnow,
)


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
    attempts: int = Field(default=0, sa_column=counter_column())
    last_error: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    runs: int = Field(default=0, sa_column=counter_column())
    summaries_written: int = Field(default=0, sa_column=counter_column())
    tokens_saved: int = Field(default=0, sa_column=counter_column(big=True))
    enqueued_at: datetime | None = Field(default=None, sa_column=optional_ts_column())
    started_at: datetime | None = Field(default=None, sa_column=optional_ts_column())
    finished_at: datetime | None = Field(default=None, sa_column=optional_ts_column())
    updated_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())


class CompressionJobRow(NamedTuple):
    """A session's compression job as the API shows it (`app.jobs.repository.get`): plain
    and immutable; the worker changes the row through the repository's updates."""

    status: str
    job_id: str | None
    attempts: int
    last_error: str | None
    enqueued_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    runs: int
    summaries_written: int
    tokens_saved: int


COMPRESSION_JOB_ROW_COLUMNS = row_columns(CompressionJobRow._fields, CompressionJob)
