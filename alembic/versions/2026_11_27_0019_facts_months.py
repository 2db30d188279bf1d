"""Memory that stays true for months (issue 37): a session has a status (`active`, `ended`:
ending it flushes its fact extraction), and a fact's history records a source removed by a
session delete (`unsupport`) and a fact made current again because the fact that had
replaced it went with its session (`restore`).

Revision ID: 0019_facts_months
Revises: 0018_manifests_json
Create Date: 2026-11-27 03:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019_facts_months"
down_revision: str | Sequence[str] | None = "0018_manifests_json"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CHANGES_OLD = (
    "change IN ('add', 'update', 'invalidate', 'forget', 'confirm', 'edit', 'delete', 'promote')"
)
_CHANGES = (
    "change IN ('add', 'update', 'invalidate', 'forget', 'confirm', 'edit', 'delete', "
    "'promote', 'unsupport', 'restore')"
)


def upgrade() -> None:
    op.drop_constraint(
        op.f("ck_memory_item_versions_change"), "memory_item_versions", type_="check"
    )
    op.create_check_constraint(
        op.f("ck_memory_item_versions_change"), "memory_item_versions", _CHANGES
    )
    op.add_column(
        "sessions",
        sa.Column("status", sa.String(length=16), nullable=False, server_default="active"),
    )
    op.add_column("sessions", sa.Column("ended_at", sa.DateTime(timezone=True)))
    op.create_check_constraint(
        op.f("ck_sessions_status"), "sessions", "status IN ('active', 'ended')"
    )


def downgrade() -> None:
    op.drop_constraint(op.f("ck_sessions_status"), "sessions", type_="check")
    op.drop_column("sessions", "ended_at")
    op.drop_column("sessions", "status")
    op.drop_constraint(
        op.f("ck_memory_item_versions_change"), "memory_item_versions", type_="check"
    )
    op.create_check_constraint(
        op.f("ck_memory_item_versions_change"), "memory_item_versions", _CHANGES_OLD
    )
