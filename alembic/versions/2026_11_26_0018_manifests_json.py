"""Context manifests are stored as `json` text, inline and uncompressed up to a page: a
recorded build's row is written on the hot path (issue 30, bench/manifests.py), where
building the `jsonb` form cost PostgreSQL as much as the rest of the insert, and
compressing a manifest over 2 kB more (`toast_tuple_target` 8160; set on each partition
when the table is hash-partitioned: a partitioned parent takes no storage parameters). No
query looks inside a manifest; the app reads it whole.

Revision ID: 0018_manifests_json
Revises: 0017_context_manifests
Create Date: 2026-11-26 04:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from app.core import partitions

revision: str = "0018_manifests_json"
down_revision: str | Sequence[str] | None = "0017_context_manifests"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _tables() -> list[str]:
    count = partitions.partition_count(op.get_bind(), "context_manifests")
    return (
        partitions.partition_names("context_manifests", count) if count else ["context_manifests"]
    )


def upgrade() -> None:
    op.alter_column(
        "context_manifests",
        "manifest",
        type_=postgresql.JSON(astext_type=sa.Text()),
        postgresql_using="manifest::json",
    )
    for table in _tables():
        op.execute(sa.text(f'ALTER TABLE "{table}" SET (toast_tuple_target = 8160)'))


def downgrade() -> None:
    for table in _tables():
        op.execute(sa.text(f'ALTER TABLE "{table}" RESET (toast_tuple_target)'))
    op.alter_column(
        "context_manifests",
        "manifest",
        type_=postgresql.JSONB(astext_type=sa.Text()),
        postgresql_using="manifest::jsonb",
    )
