"""Search: per-message lexeme length and lazily maintained per-session BM25 statistics.

Revision ID: 0006_search
Revises: 0002_auth
Create Date: 2026-11-21 23:59:00

`messages.search_length` is a stored generated column: the number of lexeme positions
of `search_vector` (BM25's |d|), computed by an IMMUTABLE SQL function so it is kept in
the same statement as the insert with no trigger and no change to the insert code.
The text search configuration itself is per tenant (`tenants.text_search_config`,
foundation): `english` by default, `simple` for languages without an English stemmer.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_search"
down_revision: str | Sequence[str] | None = "0002_auth"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LENGTH_FUNCTION = """
CREATE OR REPLACE FUNCTION loom_tsvector_length(v tsvector) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0)::integer
    FROM unnest(v) AS u
$$
"""


def upgrade() -> None:
    op.execute(LENGTH_FUNCTION)
    op.add_column(
        "messages",
        sa.Column(
            "search_length",
            sa.Integer(),
            sa.Computed("coalesce(loom_tsvector_length(search_vector), 0)", persisted=True),
            nullable=False,
        ),
    )
    op.create_table(
        "search_stats",
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("doc_count", sa.BigInteger(), nullable=False),
        sa.Column("total_length", sa.BigInteger(), nullable=False),
        sa.Column("through_seq", sa.BigInteger(), nullable=False),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_search_stats_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_search_stats_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_search_stats")),
    )
    op.create_index(op.f("ix_search_stats_tenant_id"), "search_stats", ["tenant_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_search_stats_tenant_id"), table_name="search_stats")
    op.drop_table("search_stats")
    op.drop_column("messages", "search_length")
    op.execute("DROP FUNCTION IF EXISTS loom_tsvector_length(tsvector)")
