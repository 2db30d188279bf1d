"""Facts that stay true (issue 27): a subject/attribute key per fact, when it was said,
accumulated provenance, who made each version, and failed extraction ranges.

Revision ID: 0015_facts_true
Revises: 0014_facts
Create Date: 2026-11-25 22:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0015_facts_true"
down_revision: str | Sequence[str] | None = "0014_facts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CHANGES_OLD = "change IN ('add', 'update', 'invalidate', 'forget')"
_CHANGES = (
    "change IN ('add', 'update', 'invalidate', 'forget', 'confirm', 'edit', 'delete', 'promote')"
)
_EMPTY = sa.text("'[]'::jsonb")


def upgrade() -> None:
    op.add_column("memory_items", sa.Column("fact_key", sa.String(length=200)))
    op.add_column("memory_items", sa.Column("stated_at", sa.DateTime(timezone=True)))
    op.add_column(
        "memory_items",
        sa.Column(
            "sources",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=_EMPTY,
            nullable=False,
        ),
    )
    op.create_index(
        "ix_memory_items_fact_key",
        "memory_items",
        ["tenant_id", "scope_kind", "scope_id", "fact_key"],
        postgresql_where=sa.text("fact_key IS NOT NULL"),
    )
    for column in (
        sa.Column("fact_key", sa.String(length=200)),
        sa.Column("stated_at", sa.DateTime(timezone=True)),
        sa.Column(
            "sources",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=_EMPTY,
            nullable=False,
        ),
        sa.Column("actor", sa.String(length=16)),
        sa.Column("actor_key_id", sa.Uuid()),
        sa.Column("actor_agent_id", sa.String(length=200)),
    ):
        op.add_column("memory_item_versions", column)
    op.drop_constraint(
        op.f("ck_memory_item_versions_change"), "memory_item_versions", type_="check"
    )
    op.create_check_constraint(
        op.f("ck_memory_item_versions_change"), "memory_item_versions", _CHANGES
    )
    op.add_column(
        "fact_extractions",
        sa.Column(
            "failed_ranges",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=_EMPTY,
            nullable=False,
        ),
    )
    # provenance so far: the one statement each fact kept
    op.execute("""
        UPDATE memory_items SET sources = jsonb_build_array(jsonb_build_object(
            'session_id', source_session_id::text, 'seqs', to_jsonb(source_seqs)))
        WHERE source_session_id IS NOT NULL
    """)


def downgrade() -> None:
    op.drop_column("fact_extractions", "failed_ranges")
    op.execute(
        "DELETE FROM memory_item_versions WHERE change NOT IN "
        "('add', 'update', 'invalidate', 'forget')"
    )
    op.drop_constraint(
        op.f("ck_memory_item_versions_change"), "memory_item_versions", type_="check"
    )
    op.create_check_constraint(
        op.f("ck_memory_item_versions_change"), "memory_item_versions", _CHANGES_OLD
    )
    for name in ("actor_agent_id", "actor_key_id", "actor", "sources", "stated_at", "fact_key"):
        op.drop_column("memory_item_versions", name)
    op.drop_index("ix_memory_items_fact_key", table_name="memory_items")
    for name in ("sources", "stated_at", "fact_key"):
        op.drop_column("memory_items", name)
