"""LLM jobs: compression job status (one row per session).

Revision ID: 0005_jobs
Revises: 0002_auth
Create Date: 2026-11-21 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_jobs"
# Only sessions/tenants are referenced, so this branch hangs off the auth revision.
down_revision: str | Sequence[str] | None = "0002_auth"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "compression_jobs",
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("job_id", sa.String(length=200), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("runs", sa.Integer(), server_default="0", nullable=False),
        sa.Column("summaries_written", sa.Integer(), server_default="0", nullable=False),
        sa.Column("tokens_saved", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("enqueued_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_compression_jobs_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_compression_jobs_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_compression_jobs")),
    )
    op.create_index(
        op.f("ix_compression_jobs_tenant_id"), "compression_jobs", ["tenant_id"], unique=False
    )
    op.create_index(
        "ix_compression_jobs_status_updated",
        "compression_jobs",
        ["status", "updated_at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_compression_jobs_status_updated", table_name="compression_jobs")
    op.drop_index(op.f("ix_compression_jobs_tenant_id"), table_name="compression_jobs")
    op.drop_table("compression_jobs")
