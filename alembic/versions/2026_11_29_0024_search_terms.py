"""Per-session lexeme document counts for BM25's n(t) (issue 46): `search_terms`, folded
lazily with `search_stats` by the searches, so a search over an agent or a tenant reads
n(t) from one stored row per session and lexeme instead of from every matching message.

Revision ID: 0024_search_terms
Revises: 0023_usage_ledger
Create Date: 2026-11-29 16:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.core import partitions

revision: str = "0024_search_terms"
down_revision: str | Sequence[str] | None = "0023_usage_ledger"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "search_terms",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("lexeme", sa.Text(), nullable=False),
        sa.Column("docs", sa.BigInteger(), nullable=False),
        sa.Column("through_seq", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id", "session_id"],
            ["sessions.tenant_id", "sessions.id"],
            name=op.f("fk_search_terms_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_search_terms_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "session_id", "lexeme", name=op.f("pk_search_terms")),
    )
    op.create_index(
        "ix_search_terms_lexeme",
        "search_terms",
        ["tenant_id", "lexeme", "session_id"],
        postgresql_include=["docs"],
    )
    # Existing figures were folded without their terms: fold every session again from the
    # start (the next search re-reads its messages once).
    op.execute("DELETE FROM search_stats")
    # partitioned like the rest of the tenant-owned tables (migration 0013)
    count = partitions.partition_count(op.get_bind(), "sessions")
    if count:
        partitions.rebuild(op.get_bind(), "search_terms", count)


def downgrade() -> None:
    op.drop_table("search_terms")
