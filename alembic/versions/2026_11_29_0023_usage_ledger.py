"""The LLM cost ledger and daily token budgets (issue 47): `llm_usage`, one row per LLM
call, and `tenant_budgets`, a tenant's own budget.

Revision ID: 0023_usage_ledger
Revises: 0019_facts_months
Create Date: 2026-11-29 05:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.core import partitions

revision: str = "0023_usage_ledger"
down_revision: str | Sequence[str] | None = "0020_message_prior"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "llm_usage",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column(
            "at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("agent_id", sa.String(length=200)),
        sa.Column("user_id", sa.String(length=200)),
        sa.Column("session_id", sa.Uuid()),
        sa.Column("purpose", sa.String(length=32), nullable=False),
        sa.Column("provider", sa.String(length=32), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("latency_ms", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_llm_usage_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "id", name=op.f("pk_llm_usage")),
    )
    op.create_index("ix_llm_usage_at", "llm_usage", ["tenant_id", "at"])
    op.create_index("ix_llm_usage_user", "llm_usage", ["tenant_id", "user_id"])
    op.create_index("ix_llm_usage_session", "llm_usage", ["tenant_id", "session_id"])
    op.create_table(
        "tenant_budgets",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("daily_tokens", sa.BigInteger()),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_tenant_budgets_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", name=op.f("pk_tenant_budgets")),
    )
    # partitioned like the rest of the tenant-owned tables (migration 0013)
    count = partitions.partition_count(op.get_bind(), "sessions")
    if count:
        for table in ("llm_usage", "tenant_budgets"):
            partitions.rebuild(op.get_bind(), table, count)


def downgrade() -> None:
    op.drop_table("tenant_budgets")
    op.drop_table("llm_usage")
