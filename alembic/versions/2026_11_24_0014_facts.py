"""Durable facts (issue 19): the `agent` knowledge tier, fact columns on memory items, their
version history, per-session extraction state, and a profile's default facts config.

Revision ID: 0014_facts
Revises: 0013_tenant_keys
Create Date: 2026-11-24 21:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from app.core import partitions

revision: str = "0014_facts"
down_revision: str | Sequence[str] | None = "0013_tenant_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FTS = "to_tsvector('english'::regconfig, coalesce(text, ''::text))"


def upgrade() -> None:
    op.drop_constraint(op.f("ck_memory_items_scope_kind"), "memory_items", type_="check")
    op.create_check_constraint(
        op.f("ck_memory_items_scope_kind"),
        "memory_items",
        "scope_kind IN ('task', 'project', 'global', 'agent')",
    )
    # agent ids are up to 200 characters
    op.alter_column(
        "memory_items",
        "scope_id",
        type_=sa.String(length=200),
        existing_type=sa.String(length=128),
        existing_nullable=False,
        existing_server_default="",
    )
    op.add_column("memory_items", sa.Column("valid_from", sa.DateTime(timezone=True)))
    op.add_column("memory_items", sa.Column("invalid_at", sa.DateTime(timezone=True)))
    op.add_column("memory_items", sa.Column("superseded_by", sa.Uuid()))
    op.add_column("memory_items", sa.Column("source_session_id", sa.Uuid()))
    op.add_column(
        "memory_items",
        sa.Column(
            "source_seqs",
            postgresql.ARRAY(sa.Integer()),
            server_default=sa.text("'{}'::integer[]"),
            nullable=False,
        ),
    )
    op.add_column(
        "memory_items", sa.Column("version", sa.Integer(), server_default="1", nullable=False)
    )
    op.create_index(
        "ix_memory_items_text_fts", "memory_items", [sa.text(_FTS)], postgresql_using="gin"
    )
    op.add_column("agent_profiles", sa.Column("facts", postgresql.JSONB(astext_type=sa.Text())))

    op.create_table(
        "memory_item_versions",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("item_id", sa.Uuid(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text()),
        sa.Column("importance", sa.Float(), nullable=False),
        sa.Column(
            "tags",
            postgresql.ARRAY(sa.Text()),
            server_default=sa.text("'{}'::text[]"),
            nullable=False,
        ),
        sa.Column("valid_from", sa.DateTime(timezone=True)),
        sa.Column("invalid_at", sa.DateTime(timezone=True)),
        sa.Column("superseded_by", sa.Uuid()),
        sa.Column("source_session_id", sa.Uuid()),
        sa.Column(
            "source_seqs",
            postgresql.ARRAY(sa.Integer()),
            server_default=sa.text("'{}'::integer[]"),
            nullable=False,
        ),
        sa.Column("change", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text()),
        sa.Column(
            "changed_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "change IN ('add', 'update', 'invalidate', 'forget')",
            name=op.f("ck_memory_item_versions_change"),
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_memory_item_versions_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "tenant_id", "item_id", "version", name=op.f("pk_memory_item_versions")
        ),
    )
    op.create_table(
        "fact_extractions",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("watermark_seq", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("status", sa.String(length=16), server_default="idle", nullable=False),
        sa.Column("job_id", sa.String(length=200)),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_error", sa.Text()),
        sa.Column("skipped", sa.String(length=64)),
        sa.Column("runs", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_result", postgresql.JSONB(astext_type=sa.Text())),
        sa.Column("llm_calls", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("llm_input_tokens", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("llm_output_tokens", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("enqueued_at", sa.DateTime(timezone=True)),
        sa.Column("started_at", sa.DateTime(timezone=True)),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_fact_extractions_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "session_id"],
            ["sessions.tenant_id", "sessions.id"],
            name="fk_fact_extractions_session_id_sessions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "session_id", name=op.f("pk_fact_extractions")),
    )
    op.create_index(
        "ix_fact_extractions_status_updated", "fact_extractions", ["status", "updated_at"]
    )
    # partitioned like the rest of the tenant-owned tables (migration 0013)
    count = partitions.partition_count(op.get_bind(), "sessions")
    if count:
        for table in ("memory_item_versions", "fact_extractions"):
            partitions.rebuild(op.get_bind(), table, count)


def downgrade() -> None:
    op.drop_table("fact_extractions")
    op.drop_table("memory_item_versions")
    op.drop_column("agent_profiles", "facts")
    op.drop_index("ix_memory_items_text_fts", table_name="memory_items")
    for name in (
        "version",
        "source_seqs",
        "source_session_id",
        "superseded_by",
        "invalid_at",
        "valid_from",
    ):
        op.drop_column("memory_items", name)
    op.execute("DELETE FROM memory_items WHERE scope_kind = 'agent'")
    op.alter_column(
        "memory_items",
        "scope_id",
        type_=sa.String(length=128),
        existing_type=sa.String(length=200),
        existing_nullable=False,
        existing_server_default="",
    )
    op.drop_constraint(op.f("ck_memory_items_scope_kind"), "memory_items", type_="check")
    op.create_check_constraint(
        op.f("ck_memory_items_scope_kind"),
        "memory_items",
        "scope_kind IN ('task', 'project', 'global')",
    )
