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
    session_fk,
    tenant_key,
    tenant_pk,
    ts_column,
    utcnow,
)


class SharedMemoryEntry(SQLModel, table=True):
    """One shared-memory value: (tenant, namespace, scope_id, storage_key) -> bytes.

    `value` holds the stored bytes (gzip when `compressed`); `sha256` and `size_bytes`
    describe the original bytes. `version` comes from the `shared_memory_version_seq`
    sequence, so it only ever grows (ETag, compare-and-set, cache floors).
    """

    __tablename__ = "shared_memory_entries"
    __table_args__ = (
        tenant_pk("shared_memory_entries", "id"),
        sa.UniqueConstraint("tenant_id", "ref_id", name="uq_shared_memory_entries_ref_id"),
        sa.UniqueConstraint(
            "tenant_id",
            "namespace",
            "scope_id",
            "storage_key",
            name="uq_shared_memory_entries_address",
        ),
        sa.Index(
            "ix_shared_memory_entries_expires_at",
            "expires_at",
            postgresql_where=sa.text("expires_at IS NOT NULL"),
        ),
    )

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    namespace: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    scope_id: str = Field(
        default="", sa_column=sa.Column(sa.String(256), nullable=False, server_default="")
    )
    storage_key: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    ref_id: str = Field(sa_column=sa.Column(sa.String(32), nullable=False))
    value: bytes = Field(sa_column=sa.Column(sa.LargeBinary, nullable=False))
    content_type: str = Field(sa_column=sa.Column(sa.String(255), nullable=False))
    meta: dict[str, Any] = Field(
        default_factory=dict,
        sa_column=sa.Column(
            "metadata", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")
        ),
    )
    sha256: str = Field(sa_column=sa.Column(sa.String(64), nullable=False))
    compressed: bool = Field(sa_column=sa.Column(sa.Boolean, nullable=False))
    size_bytes: int = Field(sa_column=sa.Column(sa.BigInteger, nullable=False))
    stored_bytes: int = Field(sa_column=sa.Column(sa.BigInteger, nullable=False))
    version: int = Field(sa_column=sa.Column(sa.BigInteger, nullable=False))
    writer_agent_id: str | None = Field(default=None, sa_column=sa.Column(sa.String(200)))
    expires_at: datetime | None = Field(default=None, sa_column=optional_ts_column())
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
    updated_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())


class EntryRow(NamedTuple):
    """A shared-memory entry as its reads and writes return it (`app.shared_memory.repository`):
    every column but the id and the stored bytes (read beside it when asked for), plain and
    immutable."""

    tenant_id: uuid.UUID
    namespace: str
    scope_id: str
    storage_key: str
    version: int
    content_type: str
    size_bytes: int
    stored_bytes: int
    compressed: bool
    sha256: str
    ref_id: str
    meta: dict[str, Any]
    writer_agent_id: str | None
    expires_at: datetime | None
    created_at: datetime
    updated_at: datetime


ENTRY_ROW_COLUMNS = row_columns(EntryRow._fields, SharedMemoryEntry)


class SharedMemoryRefHolder(SQLModel, table=True):
    """A message holding a data reference: while it exists the entry does not expire.

    The reference count of an entry is the number of its holder rows. Deleting the session
    (messages are append-only: they go only with their session) cascades here, which
    releases the reference. The key points at the session, not the message (migration
    0016): a key per message made deleting a big session pay one trigger per message, six
    times the cost of the delete itself (app.erasure).
    """

    __tablename__ = "shared_memory_ref_holders"
    __table_args__ = (
        tenant_pk("shared_memory_ref_holders", "entry_id", "session_id", "seq"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "entry_id"],
            ["shared_memory_entries.tenant_id", "shared_memory_entries.id"],
            name="fk_shared_memory_ref_holders_entry_id_shared_memory_entries",
            ondelete="CASCADE",
        ),
        session_fk("shared_memory_ref_holders"),
        sa.Index("ix_shared_memory_ref_holders_message", "tenant_id", "session_id", "seq"),
    )

    entry_id: uuid.UUID = Field(sa_column=sa.Column(sa.Uuid, primary_key=True))
    session_id: uuid.UUID = Field(sa_column=sa.Column(sa.Uuid, primary_key=True))
    seq: int = Field(sa_column=sa.Column(sa.BigInteger, primary_key=True))
    tenant_id: uuid.UUID = Field(sa_column=tenant_key())
    created_at: datetime = Field(default_factory=utcnow, sa_column=ts_column())
