"""Shared memory: entries (namespaced values) and data-reference holders.

Revision ID: 0007_shared
Revises: 0002_auth
Create Date: 2026-11-21 00:07:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007_shared"
down_revision: str | Sequence[str] | None = "0002_auth"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # One sequence for every entry version: versions only grow, even across re-creates.
    op.execute("CREATE SEQUENCE IF NOT EXISTS shared_memory_version_seq")
    op.create_table(
        "shared_memory_entries",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("namespace", sa.String(length=16), nullable=False),
        sa.Column("scope_id", sa.String(length=256), server_default="", nullable=False),
        sa.Column("storage_key", sa.Text(), nullable=False),
        sa.Column("ref_id", sa.String(length=32), nullable=False),
        sa.Column("value", sa.LargeBinary(), nullable=False),
        sa.Column("content_type", sa.String(length=255), nullable=False),
        sa.Column(
            "metadata",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("compressed", sa.Boolean(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("stored_bytes", sa.BigInteger(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("writer_agent_id", sa.String(length=200), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_shared_memory_entries_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_shared_memory_entries")),
        sa.UniqueConstraint("ref_id", name=op.f("uq_shared_memory_entries_ref_id")),
        sa.UniqueConstraint(
            "tenant_id",
            "namespace",
            "scope_id",
            "storage_key",
            name="uq_shared_memory_entries_address",
        ),
    )
    # Values live in a TOAST-ed bytea; skip pglz on top of our own gzip (and on small values).
    op.execute("ALTER TABLE shared_memory_entries ALTER COLUMN value SET STORAGE EXTERNAL")
    op.create_index(
        op.f("ix_shared_memory_entries_tenant_id"),
        "shared_memory_entries",
        ["tenant_id"],
        unique=False,
    )
    op.create_index(
        "ix_shared_memory_entries_expires_at",
        "shared_memory_entries",
        ["expires_at"],
        unique=False,
        postgresql_where=sa.text("expires_at IS NOT NULL"),
    )
    op.create_table(
        "shared_memory_ref_holders",
        sa.Column("entry_id", sa.Uuid(), nullable=False),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["entry_id"],
            ["shared_memory_entries.id"],
            name=op.f("fk_shared_memory_ref_holders_entry_id_shared_memory_entries"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["session_id", "seq"],
            ["messages.session_id", "messages.seq"],
            name="fk_shared_memory_ref_holders_message",
            ondelete="CASCADE",
            deferrable=True,
            initially="DEFERRED",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_shared_memory_ref_holders_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "entry_id", "session_id", "seq", name=op.f("pk_shared_memory_ref_holders")
        ),
    )
    op.create_index(
        "ix_shared_memory_ref_holders_message",
        "shared_memory_ref_holders",
        ["session_id", "seq"],
        unique=False,
    )
    op.create_index(
        op.f("ix_shared_memory_ref_holders_tenant_id"),
        "shared_memory_ref_holders",
        ["tenant_id"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_table("shared_memory_ref_holders")
    op.drop_table("shared_memory_entries")
    op.execute("DROP SEQUENCE IF EXISTS shared_memory_version_seq")
