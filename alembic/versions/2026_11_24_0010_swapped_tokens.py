"""Stored token counter of the messages before L1 (the append's pressure check reads it).

L1 tokens = sessions.message_tokens - memory_states.swapped_tokens, so an append learns
whether compression is due from two counters instead of a sum over the L1 backlog.

Revision ID: 0010_swapped_tokens
Revises: 0009_merge_l2_index
Create Date: 2026-11-24 16:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_swapped_tokens"
down_revision: str | Sequence[str] | None = "0009_merge_l2_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "memory_states",
        sa.Column("swapped_tokens", sa.BigInteger(), nullable=False, server_default="0"),
    )
    op.execute("""
        UPDATE memory_states m SET swapped_tokens = coalesce(
            (SELECT sum(x.token_count) FROM messages x
              WHERE x.tenant_id = m.tenant_id AND x.session_id = m.session_id
                AND x.seq < m.l1_start_seq), 0)
        WHERE m.l1_start_seq > 1
    """)


def downgrade() -> None:
    op.drop_column("memory_states", "swapped_tokens")
