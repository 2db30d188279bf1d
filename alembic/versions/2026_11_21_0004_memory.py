"""Segmented memory: agent profiles, per-session memory state, L2 summaries, snapshots.

Revision ID: 0004_memory
Revises: 0002_auth
Create Date: 2026-11-22 00:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004_memory"
down_revision: str | Sequence[str] | None = "0002_auth"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NOW = sa.text("now()")


def _tenant(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["tenant_id"],
        ["tenants.id"],
        name=op.f(f"fk_{table}_tenant_id_tenants"),
        ondelete="CASCADE",
    )


def _session(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["session_id"],
        ["sessions.id"],
        name=op.f(f"fk_{table}_session_id_sessions"),
        ondelete="CASCADE",
    )


def upgrade() -> None:
    op.create_table(
        "agent_profiles",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("agent_id", sa.String(length=200), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("system_prompt", sa.Text(), nullable=False),
        sa.Column("patterns", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("backend_schema", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        _tenant("agent_profiles"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_profiles")),
        sa.UniqueConstraint(
            "tenant_id", "agent_id", "version", name="uq_agent_profiles_tenant_agent_version"
        ),
    )
    op.create_index(op.f("ix_agent_profiles_tenant_id"), "agent_profiles", ["tenant_id"])

    op.create_table(
        "memory_states",
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("version", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("l1_start_seq", sa.BigInteger(), server_default="1", nullable=False),
        sa.Column("rom", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("rom_text", sa.Text(), server_default="", nullable=False),
        sa.Column("rom_tokens", sa.Integer(), server_default="0", nullable=False),
        sa.Column("kernel", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("kernel_tokens", sa.Integer(), server_default="0", nullable=False),
        sa.Column("promoted_seqs", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("promoted_tokens", sa.Integer(), server_default="0", nullable=False),
        sa.Column("l2_tokens", sa.Integer(), server_default="0", nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        _session("memory_states"),
        _tenant("memory_states"),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_memory_states")),
    )
    op.create_index(op.f("ix_memory_states_tenant_id"), "memory_states", ["tenant_id"])

    op.create_table(
        "memory_snapshots",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("snapshot_type", sa.String(length=32), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("summary_count", sa.Integer(), nullable=False),
        sa.Column("start_seq", sa.BigInteger(), nullable=False),
        sa.Column("end_seq", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        _session("memory_snapshots"),
        _tenant("memory_snapshots"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_snapshots")),
    )
    op.create_index(op.f("ix_memory_snapshots_tenant_id"), "memory_snapshots", ["tenant_id"])
    op.create_index(
        "ix_memory_snapshots_session_created", "memory_snapshots", ["session_id", "created_at"]
    )

    op.create_table(
        "memory_summaries",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("start_seq", sa.BigInteger(), nullable=False),
        sa.Column("end_seq", sa.BigInteger(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("method", sa.String(length=16), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("snapshot_id", sa.Uuid(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        _session("memory_summaries"),
        _tenant("memory_summaries"),
        sa.ForeignKeyConstraint(
            ["snapshot_id"],
            ["memory_snapshots.id"],
            name=op.f("fk_memory_summaries_snapshot_id_memory_snapshots"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_summaries")),
        sa.UniqueConstraint("session_id", "start_seq", name="uq_memory_summaries_session_start"),
    )
    op.create_index(op.f("ix_memory_summaries_tenant_id"), "memory_summaries", ["tenant_id"])
    op.create_index(op.f("ix_memory_summaries_snapshot_id"), "memory_summaries", ["snapshot_id"])


def downgrade() -> None:
    op.drop_table("memory_summaries")
    op.drop_table("memory_snapshots")
    op.drop_table("memory_states")
    op.drop_table("agent_profiles")
