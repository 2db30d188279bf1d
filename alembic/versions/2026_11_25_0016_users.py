"""Users and erasure (issue 28): `user_id` and the erasure tombstone on sessions, the `user`
knowledge tier, the `erasures` table (receipts and audit), and the triggers that keep an
erased subject from being written back.

Revision ID: 0016_users
Revises: 0014_facts
Create Date: 2026-11-25 22:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from app.core import partitions

revision: str = "0016_users"
down_revision: str | Sequence[str] | None = "0015_facts_true"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The guard of every write that could bring an erased subject back (app.erasure): a
# running erasure of a user (or an agent's private memory) refuses new rows in that user's
# (agent's) tier, and sessions under erasure (tombstoned: `erasure_id` set) refuse facts
# that name them as their source and entries in their `session` scope. The shared advisory
# lock pairs with the exclusive one the erasure request takes while it sets the tombstone,
# and FOR KEY SHARE on the session row with the FOR UPDATE the tombstone takes first, so a
# write racing the request either commits before the tombstone (and is erased) or sees it
# (and fails). KEY SHARE, not SHARE: two appends to one session that both offload a tool
# result must not deadlock on their UPDATE of the session row.
_GUARD = """
CREATE OR REPLACE FUNCTION loom_subject_erasing(t uuid, k text, s text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock_shared(hashtextextended('loom-erasure:' || t || ':' || k
                                                        || ':' || s, 0));
  RETURN EXISTS (SELECT 1 FROM erasures e WHERE e.tenant_id = t AND e.kind = k
                 AND e.subject = s AND e.status = 'running');
END $$;

CREATE OR REPLACE FUNCTION loom_session_erased(t uuid, sid uuid) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM sessions s WHERE s.tenant_id = t AND s.id = sid AND s.erasure_id IS NULL
    FOR KEY SHARE;
  RETURN NOT FOUND;
END $$;

CREATE OR REPLACE FUNCTION loom_guard_memory_items() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.scope_kind IN ('user', 'agent') AND (TG_OP = 'INSERT'
      OR (NEW.scope_kind, NEW.scope_id) IS DISTINCT FROM (OLD.scope_kind, OLD.scope_id))
     AND loom_subject_erasing(NEW.tenant_id, NEW.scope_kind, NEW.scope_id) THEN
    RAISE EXCEPTION 'loom: this % is being erased', NEW.scope_kind USING ERRCODE = 'LM409';
  END IF;
  IF NEW.source_session_id IS NOT NULL AND (TG_OP = 'INSERT'
      OR NEW.source_session_id IS DISTINCT FROM OLD.source_session_id)
     AND loom_session_erased(NEW.tenant_id, NEW.source_session_id) THEN
    RAISE EXCEPTION 'loom: the source session is gone' USING ERRCODE = 'LM404';
  END IF;
  RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION loom_guard_shared_memory() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.namespace = 'agent' AND loom_subject_erasing(NEW.tenant_id, 'agent', NEW.scope_id)
  THEN
    RAISE EXCEPTION 'loom: this agent is being erased' USING ERRCODE = 'LM409';
  END IF;
  IF NEW.namespace = 'session' AND NEW.scope_id ~ '^[0-9a-f-]{36}$'
     AND loom_session_erased(NEW.tenant_id, NEW.scope_id::uuid) THEN
    RAISE EXCEPTION 'loom: the session is gone' USING ERRCODE = 'LM404';
  END IF;
  RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION loom_guard_sessions() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.user_id IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.user_id IS DISTINCT FROM OLD.user_id)
     AND loom_subject_erasing(NEW.tenant_id, 'user', NEW.user_id) THEN
    RAISE EXCEPTION 'loom: this user is being erased' USING ERRCODE = 'LM409';
  END IF;
  RETURN NEW;
END $$;
"""

_TRIGGERS = (
    ("memory_items", "loom_guard_memory_items", "INSERT OR UPDATE"),
    ("shared_memory_entries", "loom_guard_shared_memory", "INSERT OR UPDATE"),
    ("sessions", "loom_guard_sessions", "INSERT OR UPDATE OF user_id"),
)


def upgrade() -> None:
    op.add_column("sessions", sa.Column("user_id", sa.String(length=200)))
    op.add_column("sessions", sa.Column("erasure_id", sa.Uuid()))
    op.create_index(
        "ix_sessions_tenant_user_created",
        "sessions",
        ["tenant_id", "user_id", "created_at"],
        postgresql_where=sa.text("user_id IS NOT NULL"),
    )
    op.create_index(
        "ix_sessions_tenant_erasure",
        "sessions",
        ["tenant_id", "erasure_id"],
        postgresql_where=sa.text("erasure_id IS NOT NULL"),
    )
    op.drop_constraint(op.f("ck_memory_items_scope_kind"), "memory_items", type_="check")
    op.create_check_constraint(
        op.f("ck_memory_items_scope_kind"),
        "memory_items",
        "scope_kind IN ('task', 'project', 'global', 'agent', 'user')",
    )
    op.create_index(
        "ix_memory_items_source_session",
        "memory_items",
        ["tenant_id", "source_session_id"],
        postgresql_where=sa.text("source_session_id IS NOT NULL"),
    )
    op.create_index(
        "ix_memory_item_versions_source_session",
        "memory_item_versions",
        ["tenant_id", "source_session_id"],
        postgresql_where=sa.text("source_session_id IS NOT NULL"),
    )
    op.create_table(
        "erasures",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("subject", sa.String(length=200)),
        sa.Column("subject_hash", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("requested_by", sa.Uuid()),
        sa.Column("requested_role", sa.String(length=16), nullable=False),
        sa.Column(
            "counts",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column(
            "started_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint("kind IN ('user', 'session', 'agent')", name=op.f("ck_erasures_kind")),
        sa.CheckConstraint("status IN ('running', 'completed')", name=op.f("ck_erasures_status")),
        sa.CheckConstraint(
            "status = 'running' OR subject IS NULL", name=op.f("ck_erasures_no_subject_kept")
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_erasures_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "id", name=op.f("pk_erasures")),
    )
    op.create_index("ix_erasures_tenant_hash", "erasures", ["tenant_id", "subject_hash"])
    op.create_index(
        "ix_erasures_running",
        "erasures",
        ["tenant_id", "kind", "subject"],
        postgresql_where=sa.text("status = 'running'"),
    )
    op.create_index("ix_erasures_status_updated", "erasures", ["status", "updated_at"])
    count = partitions.partition_count(op.get_bind(), "sessions")
    if count:
        partitions.rebuild(op.get_bind(), "erasures", count)
    # a reference holder goes with its session, not through a key per message: deleting a
    # big session paid one trigger per message (6x the delete itself); messages are never
    # deleted one by one
    op.drop_constraint(
        "fk_shared_memory_ref_holders_message", "shared_memory_ref_holders", type_="foreignkey"
    )
    op.create_foreign_key(
        "fk_shared_memory_ref_holders_session_id_sessions",
        "shared_memory_ref_holders",
        "sessions",
        ["tenant_id", "session_id"],
        ["tenant_id", "id"],
        ondelete="CASCADE",
    )
    for statement in _GUARD.split("\n\n"):
        op.execute(statement)
    for table, fn, events in _TRIGGERS:
        op.execute(
            f"CREATE TRIGGER {fn} BEFORE {events} ON {table} FOR EACH ROW EXECUTE FUNCTION {fn}()"
        )


def downgrade() -> None:
    for table, fn, _ in _TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {fn} ON {table}")
        op.execute(f"DROP FUNCTION IF EXISTS {fn}()")
    op.execute("DROP FUNCTION IF EXISTS loom_subject_erasing(uuid, text, text)")
    op.execute("DROP FUNCTION IF EXISTS loom_session_erased(uuid, uuid)")
    op.drop_table("erasures")
    op.drop_constraint(
        "fk_shared_memory_ref_holders_session_id_sessions",
        "shared_memory_ref_holders",
        type_="foreignkey",
    )
    op.execute(
        "DELETE FROM shared_memory_ref_holders h WHERE NOT EXISTS (SELECT 1 FROM "
        "messages m WHERE m.tenant_id = h.tenant_id AND m.session_id = h.session_id "
        "AND m.seq = h.seq)"
    )
    op.create_foreign_key(
        "fk_shared_memory_ref_holders_message",
        "shared_memory_ref_holders",
        "messages",
        ["tenant_id", "session_id", "seq"],
        ["tenant_id", "session_id", "seq"],
        ondelete="CASCADE",
        deferrable=True,
        initially="DEFERRED",
    )
    op.drop_index("ix_memory_items_source_session", table_name="memory_items")
    op.drop_index("ix_memory_item_versions_source_session", table_name="memory_item_versions")
    op.execute("DELETE FROM memory_items WHERE scope_kind = 'user'")
    op.drop_constraint(op.f("ck_memory_items_scope_kind"), "memory_items", type_="check")
    op.create_check_constraint(
        op.f("ck_memory_items_scope_kind"),
        "memory_items",
        "scope_kind IN ('task', 'project', 'global', 'agent')",
    )
    op.drop_index("ix_sessions_tenant_erasure", table_name="sessions")
    op.drop_index("ix_sessions_tenant_user_created", table_name="sessions")
    op.drop_column("sessions", "erasure_id")
    op.drop_column("sessions", "user_id")
