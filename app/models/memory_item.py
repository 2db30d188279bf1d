import uuid
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
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


class MemoryItem(SQLModel, table=True):
    """A task/project/global/agent knowledge item (seed tiered-memory-design.md ``ContextItem``).

    The scope is split into ``scope_kind`` + ``scope_id`` ('' for global, the agent id for
    ``agent``) so that one composite index serves tier queries, packages and eviction.
    Facts (``kind='fact'``) also carry their provenance, validity and version;
    earlier versions live in ``memory_item_versions``.
    """

    __tablename__ = "memory_items"
    __table_args__ = (
        tenant_pk("memory_items", "id"),
        sa.CheckConstraint(
            "scope_kind IN ('task', 'project', 'global', 'agent', 'user')", name="scope_kind"
        ),
        sa.CheckConstraint("importance >= 0 AND importance <= 1", name="importance_range"),
        sa.Index(
            "ix_memory_items_scope_rank",
            "tenant_id",
            "scope_kind",
            "scope_id",
            "importance",
            "created_at",
        ),
        sa.Index("ix_memory_items_tenant_created", "tenant_id", "created_at", "id"),
        sa.Index("ix_memory_items_tags", "tags", postgresql_using="gin"),
        # what an erasure of a session finds among the facts (app.erasure)
        sa.Index(
            "ix_memory_items_source_session",
            "tenant_id",
            "source_session_id",
            postgresql_where=sa.text("source_session_id IS NOT NULL"),
        ),
        # candidate lookup of fact extraction and search_facts (app.facts.repository)
        sa.Index(
            "ix_memory_items_text_fts",
            sa.text("to_tsvector('english'::regconfig, coalesce(text, ''::text))"),
            postgresql_using="gin",
        ),
        # a fact's subject/attribute key: the stored facts a candidate could contradict
        sa.Index(
            "ix_memory_items_fact_key",
            "tenant_id",
            "scope_kind",
            "scope_id",
            "fact_key",
            postgresql_where=sa.text("fact_key IS NOT NULL"),
        ),
    )

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    scope_kind: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    scope_id: str = Field(
        default="", sa_column=sa.Column(sa.String(200), nullable=False, server_default="")
    )
    kind: str = Field(sa_column=sa.Column(sa.String(100), nullable=False))
    source: str = Field(
        default="", sa_column=sa.Column(sa.String(200), nullable=False, server_default="")
    )
    tags: list[str] = Field(
        default_factory=list,
        sa_column=sa.Column(ARRAY(sa.Text), nullable=False, server_default=sa.text("'{}'::text[]")),
    )
    importance: float = Field(default=0.5, sa_column=sa.Column(sa.Float, nullable=False))
    text: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    payload: Any = Field(default=None, sa_column=sa.Column(JSONB))
    token_cost: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    updated_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
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
    version: int = Field(
        default=1, sa_column=sa.Column(sa.Integer, nullable=False, server_default="1")
    )
    # a `user.home_city`-like key, when it was said (valid_from is when it became
    # true), and every statement supporting it ([{session_id, seqs}])
    fact_key: str | None = Field(default=None, sa_column=sa.Column(sa.String(200)))
    stated_at: datetime | None = Field(default=None, sa_column=optional_ts_column())
    sources: list[dict[str, Any]] = Field(
        default_factory=list,
        sa_column=sa.Column(JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
    )


class MemoryItemRow(NamedTuple):
    """A memory item as the SQL reads take it: plain and immutable, every column of
    `MemoryItem` in the table's order. The select list comes from the model
    (`MEMORY_ITEM_ROW_COLUMNS`); `payload` and `sources` come back decoded (the pool's
    jsonb codec), `tags` and `source_seqs` as lists."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    scope_kind: str
    scope_id: str
    kind: str
    source: str
    tags: list[str]
    importance: float
    text: str | None
    payload: Any
    token_cost: int
    created_at: datetime
    updated_at: datetime
    valid_from: datetime | None
    invalid_at: datetime | None
    superseded_by: uuid.UUID | None
    source_session_id: uuid.UUID | None
    source_seqs: list[int]
    version: int
    fact_key: str | None
    stated_at: datetime | None
    sources: list[dict[str, Any]]


MEMORY_ITEM_ROW_COLUMNS = row_columns(MemoryItemRow._fields, MemoryItem)
