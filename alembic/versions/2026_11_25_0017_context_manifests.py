"""Context manifests (issue 30): one row per recorded context build, and the agent
profile's default `config.audit`.

Revision ID: 0017_context_manifests
Revises: 0014_facts
Create Date: 2026-11-25 22:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from app.core import partitions

revision: str = "0017_context_manifests"
down_revision: str | Sequence[str] | None = "0016_users"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "context_manifests",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("format", sa.String(length=16), nullable=False),
        sa.Column("total_tokens", sa.Integer(), nullable=False),
        sa.Column("budget", sa.Integer(), nullable=False),
        sa.Column("manifest", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_context_manifests_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "session_id"],
            ["sessions.tenant_id", "sessions.id"],
            name="fk_context_manifests_session_id_sessions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "id", name=op.f("pk_context_manifests")),
    )
    op.create_index(
        "ix_context_manifests_session_created",
        "context_manifests",
        ["tenant_id", "session_id", "created_at", "id"],
    )
    op.create_index("ix_context_manifests_created", "context_manifests", ["created_at"])
    op.add_column("agent_profiles", sa.Column("audit", sa.Boolean()))
    # partitioned like the rest of the tenant-owned tables (migration 0013)
    count = partitions.partition_count(op.get_bind(), "sessions")
    if count:
        partitions.rebuild(op.get_bind(), "context_manifests", count)


def downgrade() -> None:
    op.drop_column("agent_profiles", "audit")
    op.drop_table("context_manifests")
