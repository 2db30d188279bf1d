"""Fact history and per-session extraction state."""

import uuid
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
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


class MemoryItemVersion(SQLModel, table=True):
    """One version of a memory item (a fact): what it said and why it changed.

    Written in the same transaction as the change to the item; never edited. Kept as an
    audit log when the item itself is deleted (so no foreign key to memory_items; the
    tenant's deletion removes it).
    """

    __tablename__ = "memory_item_versions"
    __table_args__ = (
        tenant_pk("memory_item_versions", "item_id", "version"),
        sa.CheckConstraint(
            "change IN ('add', 'update', 'invalidate', 'forget', 'confirm', "
            "'edit', 'delete', 'promote', 'unsupport', 'restore')",
            name="change",
        ),
        # what an erasure of a session finds among the versions (app.erasure)
        sa.Index(
            "ix_memory_item_versions_source_session",
            "tenant_id",
            "source_session_id",
            postgresql_where=sa.text("source_session_id IS NOT NULL"),
        ),
    )

    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    item_id: uuid.UUID = Field(sa_column=sa.Column(sa.Uuid, primary_key=True))
    version: int = Field(sa_column=sa.Column(sa.Integer, primary_key=True))
    text: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    importance: float = Field(sa_column=sa.Column(sa.Float, nullable=False))
    tags: list[str] = Field(
        default_factory=list,
        sa_column=sa.Column(ARRAY(sa.Text), nullable=False, server_default=sa.text("'{}'::text[]")),
    )
    valid_from: datetime | None = Field(default=None, sa_column=optional_ts_column())
    invalid_at: datetime | None = Field(default=None, sa_column=optional_ts_column())
    superseded_by: uuid.UUID | None = Field(default=None, sa_column=sa.Column(sa.Uuid))
    source_session_id: uuid.UUID | None = Field(default=None, sa_column=sa.Column(sa.Uuid))
    source_seqs: list[int] = Field(
        default_factory=list,
        sa_column=sa.Column(
            ARRAY(sa.Integer), nullable=False, server_default=sa.text("'{}'::integer[]")
        ),
    )
    change: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    reason: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    changed_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    fact_key: str | None = Field(default=None, sa_column=sa.Column(sa.String(200)))
    stated_at: datetime | None = Field(default=None, sa_column=optional_ts_column())
    sources: list[dict[str, Any]] = Field(
        default_factory=list,
        sa_column=sa.Column(JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
    )
    # who: extraction, api, mcp or tool; the API key and the agent acting
    actor: str | None = Field(default=None, sa_column=sa.Column(sa.String(16)))
    actor_key_id: uuid.UUID | None = Field(default=None, sa_column=sa.Column(sa.Uuid))
    actor_agent_id: str | None = Field(default=None, sa_column=sa.Column(sa.String(200)))


class MemoryItemVersionRow(NamedTuple):
    """A version row as the SQL reads take it: every column of `MemoryItemVersion`, in the
    table's order (`MEMORY_ITEM_VERSION_ROW_COLUMNS`)."""

    tenant_id: uuid.UUID
    item_id: uuid.UUID
    version: int
    text: str | None
    importance: float
    tags: list[str]
    valid_from: datetime | None
    invalid_at: datetime | None
    superseded_by: uuid.UUID | None
    source_session_id: uuid.UUID | None
    source_seqs: list[int]
    change: str
    reason: str | None
    changed_at: datetime
    fact_key: str | None
    stated_at: datetime | None
    sources: list[dict[str, Any]]
    actor: str | None
    actor_key_id: uuid.UUID | None
    actor_agent_id: str | None


MEMORY_ITEM_VERSION_ROW_COLUMNS = row_columns(MemoryItemVersionRow._fields, MemoryItemVersion)


class FactExtraction(SQLModel, table=True):
    """A session's fact extraction: the watermark (last extracted seq) and the latest job.

    The watermark moves in the same transaction as the facts a job writes, so a message is
    read by exactly one successful job.
    """

    __tablename__ = "fact_extractions"
    __table_args__ = (
        tenant_pk("fact_extractions", "session_id"),
        session_fk("fact_extractions"),
        # the cron pass's look for lost jobs, across tenants
        sa.Index("ix_fact_extractions_status_updated", "status", "updated_at"),
    )

    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    session_id: uuid.UUID = Field(sa_column=sa.Column(sa.Uuid, primary_key=True))
    watermark_seq: int = Field(default=0, sa_column=counter_column(big=True))
    status: str = Field(
        default="idle", sa_column=sa.Column(sa.String(16), nullable=False, server_default="idle")
    )
    job_id: str | None = Field(default=None, sa_column=sa.Column(sa.String(200)))
    attempts: int = Field(default=0, sa_column=counter_column())
    last_error: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    skipped: str | None = Field(default=None, sa_column=sa.Column(sa.String(64)))
    runs: int = Field(default=0, sa_column=counter_column())
    last_result: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(JSONB))
    llm_calls: int = Field(default=0, sa_column=counter_column(big=True))
    llm_input_tokens: int = Field(default=0, sa_column=counter_column(big=True))
    llm_output_tokens: int = Field(default=0, sa_column=counter_column(big=True))
    enqueued_at: datetime | None = Field(default=None, sa_column=optional_ts_column())
    started_at: datetime | None = Field(default=None, sa_column=optional_ts_column())
    finished_at: datetime | None = Field(default=None, sa_column=optional_ts_column())
    updated_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    # message ranges whose batch failed every try ([{first_seq, last_seq, error, at}]):
    # the watermark moved past them; `POST .../memory/extract?retry_failed=true` re-runs them
    failed_ranges: list[dict[str, Any]] = Field(
        default_factory=list,
        sa_column=sa.Column(JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
    )


class FactExtractionRow(NamedTuple):
    """A session's extraction state as `app.facts.state` reads it: every column of
    `FactExtraction`, in the table's order (`FACT_EXTRACTION_ROW_COLUMNS`)."""

    tenant_id: uuid.UUID
    session_id: uuid.UUID
    watermark_seq: int
    status: str
    job_id: str | None
    attempts: int
    last_error: str | None
    skipped: str | None
    runs: int
    last_result: dict[str, Any] | None
    llm_calls: int
    llm_input_tokens: int
    llm_output_tokens: int
    enqueued_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    failed_ranges: list[dict[str, Any]]


FACT_EXTRACTION_ROW_COLUMNS = row_columns(FactExtractionRow._fields, FactExtraction)
