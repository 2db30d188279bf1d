"""Knowledge tiers: memory items (task/project/global) and learned-layer versions.

Revision ID: 0008_knowledge
Revises: 0002_auth
Create Date: 2026-11-21 23:59:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008_knowledge"
down_revision: str | Sequence[str] | None = "0002_auth"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "learned_heads",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("agent_id", sa.String(length=200), nullable=False),
        sa.Column("active_version", sa.Integer(), nullable=False),
        sa.Column("latest_version", sa.Integer(), nullable=False),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_learned_heads_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_learned_heads")),
        sa.UniqueConstraint("tenant_id", "agent_id", name="uq_learned_heads_agent"),
    )
    op.create_index(
        op.f("ix_learned_heads_tenant_id"), "learned_heads", ["tenant_id"], unique=False
    )
    op.create_table(
        "learned_versions",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("agent_id", sa.String(length=200), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("content", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_learned_versions_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_learned_versions")),
        sa.UniqueConstraint(
            "tenant_id", "agent_id", "version", name="uq_learned_versions_agent_version"
        ),
    )
    op.create_index(
        op.f("ix_learned_versions_tenant_id"), "learned_versions", ["tenant_id"], unique=False
    )
    op.create_table(
        "memory_items",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("scope_kind", sa.String(length=16), nullable=False),
        sa.Column("scope_id", sa.String(length=128), server_default="", nullable=False),
        sa.Column("kind", sa.String(length=100), nullable=False),
        sa.Column("source", sa.String(length=200), server_default="", nullable=False),
        sa.Column(
            "tags",
            postgresql.ARRAY(sa.Text()),
            server_default=sa.text("'{}'::text[]"),
            nullable=False,
        ),
        sa.Column("importance", sa.Float(), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("payload", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("token_cost", sa.Integer(), nullable=False),
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
        sa.CheckConstraint(
            "scope_kind IN ('task', 'project', 'global')", name=op.f("ck_memory_items_scope_kind")
        ),
        sa.CheckConstraint(
            "importance >= 0 AND importance <= 1", name=op.f("ck_memory_items_importance_range")
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_memory_items_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_items")),
    )
    op.create_index(
        "ix_memory_items_scope_rank",
        "memory_items",
        ["tenant_id", "scope_kind", "scope_id", "importance", "created_at"],
        unique=False,
    )
    op.create_index(
        "ix_memory_items_tags", "memory_items", ["tags"], unique=False, postgresql_using="gin"
    )
    op.create_index(
        "ix_memory_items_tenant_created",
        "memory_items",
        ["tenant_id", "created_at", "id"],
        unique=False,
    )
    op.create_index(op.f("ix_memory_items_tenant_id"), "memory_items", ["tenant_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_memory_items_tenant_id"), table_name="memory_items")
    op.drop_index("ix_memory_items_tenant_created", table_name="memory_items")
    op.drop_index("ix_memory_items_tags", table_name="memory_items", postgresql_using="gin")
    op.drop_index("ix_memory_items_scope_rank", table_name="memory_items")
    op.drop_table("memory_items")
    op.drop_index(op.f("ix_learned_versions_tenant_id"), table_name="learned_versions")
    op.drop_table("learned_versions")
    op.drop_index(op.f("ix_learned_heads_tenant_id"), table_name="learned_heads")
    op.drop_table("learned_heads")
