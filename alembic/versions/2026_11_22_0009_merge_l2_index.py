"""Merge the domain branches; partial index for L2 reads.

Revision ID: 0009_merge_l2_index
Revises: 0004_memory, 0005_jobs, 0006_search, 0007_shared, 0008_knowledge
Create Date: 2026-11-22 01:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_merge_l2_index"
down_revision: str | Sequence[str] | None = (
    "0004_memory",
    "0005_jobs",
    "0006_search",
    "0007_shared",
    "0008_knowledge",
)
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_memory_summaries_l2",
        "memory_summaries",
        ["session_id", "start_seq"],
        unique=False,
        postgresql_where=sa.text("snapshot_id IS NULL"),
    )


def downgrade() -> None:
    op.drop_index(
        "ix_memory_summaries_l2",
        table_name="memory_summaries",
        postgresql_where=sa.text("snapshot_id IS NULL"),
    )
