"""Tenant as the distribution key: `tenant_id` leads every key of the tenant-owned tables.

Every primary key, unique constraint and foreign key of a tenant-owned table starts with
`tenant_id`, which is what Citus needs to distribute the schema by tenant (co-located:
a session, its messages, memory state, summaries, jobs and shared-memory references sit on
one shard) and what PostgreSQL needs to hash-partition it. `tenants` and `api_keys` are the
small global tables (Citus reference tables) and keep their keys. The single-column
`tenant_id` indexes go: each primary key now leads with the column.

With `LOOM_PARTITIONS=N` (or the caller's `partitions` attribute) the tenant-owned tables
are then rebuilt hash-partitioned by `tenant_id` into N partitions (`app.core.partitions`).
Rows are kept either way; the downgrade undoes both.

Revision ID: 0013_tenant_keys
Revises: 0012_tenant_names
Create Date: 2026-11-24 21:40:00
"""

from collections.abc import Sequence

from alembic import context, op

from app.core import partitions

revision: str = "0013_tenant_keys"
down_revision: str | Sequence[str] | None = "0012_tenant_names"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# table -> primary key before this migration (the new one is tenant_id + these)
_PKS: dict[str, tuple[str, ...]] = {
    "sessions": ("id",),
    "messages": ("session_id", "seq"),
    "memory_states": ("session_id",),
    "memory_snapshots": ("id",),
    "memory_summaries": ("id",),
    "compression_jobs": ("session_id",),
    "idempotency_records": ("session_id", "key"),
    "search_stats": ("session_id",),
    "shared_memory_entries": ("id",),
    "shared_memory_ref_holders": ("entry_id", "session_id", "seq"),
    "memory_items": ("id",),
    "agent_profiles": ("id",),
    "learned_versions": ("id",),
    "learned_heads": ("id",),
}

# (table, name, columns) of the unique constraints that did not lead with tenant_id
_UNIQUES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("memory_summaries", "uq_memory_summaries_session_start", ("session_id", "start_seq")),
    ("shared_memory_entries", "uq_shared_memory_entries_ref_id", ("ref_id",)),
)

_SESSION_CHILDREN = (
    "messages",
    "memory_states",
    "memory_snapshots",
    "memory_summaries",
    "compression_jobs",
    "idempotency_records",
    "search_stats",
)


def _fk(table: str) -> str:
    return f"fk_{table}_session_id_sessions"


# (table, name, old definition, new definition) of the foreign keys between tenant tables
_FKS: tuple[tuple[str, str, str, str], ...] = (
    *(
        (
            t,
            _fk(t),
            "FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE",
            "FOREIGN KEY (tenant_id, session_id) REFERENCES sessions (tenant_id, id) "
            "ON DELETE CASCADE",
        )
        for t in _SESSION_CHILDREN
    ),
    (
        "memory_summaries",
        "fk_memory_summaries_snapshot_id_memory_snapshots",
        "FOREIGN KEY (snapshot_id) REFERENCES memory_snapshots (id) ON DELETE SET NULL",
        # PostgreSQL 15: only snapshot_id is nulled, tenant_id stays
        "FOREIGN KEY (tenant_id, snapshot_id) REFERENCES memory_snapshots (tenant_id, id) "
        "ON DELETE SET NULL (snapshot_id)",
    ),
    (
        "shared_memory_ref_holders",
        "fk_shared_memory_ref_holders_entry_id_shared_memory_entries",
        "FOREIGN KEY (entry_id) REFERENCES shared_memory_entries (id) ON DELETE CASCADE",
        "FOREIGN KEY (tenant_id, entry_id) REFERENCES shared_memory_entries (tenant_id, id) "
        "ON DELETE CASCADE",
    ),
    (
        "shared_memory_ref_holders",
        "fk_shared_memory_ref_holders_message",
        "FOREIGN KEY (session_id, seq) REFERENCES messages (session_id, seq) ON DELETE CASCADE "
        "DEFERRABLE INITIALLY DEFERRED",
        "FOREIGN KEY (tenant_id, session_id, seq) REFERENCES messages (tenant_id, session_id, seq) "
        "ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED",
    ),
)

# (name, table, old columns, new columns) of the indexes that now lead with tenant_id
_INDEXES: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    (
        "ix_memory_summaries_snapshot_id",
        "memory_summaries",
        ("snapshot_id",),
        ("tenant_id", "snapshot_id"),
    ),
    (
        "ix_shared_memory_ref_holders_message",
        "shared_memory_ref_holders",
        ("session_id", "seq"),
        ("tenant_id", "session_id", "seq"),
    ),
)


def _rekey(new: bool) -> None:
    for table, name, _, _ in _FKS:
        op.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
    for table, name, _ in _UNIQUES:
        op.drop_constraint(name, table, type_="unique")
    for table, cols in _PKS.items():
        op.drop_constraint(f"pk_{table}", table, type_="primary")
        op.create_primary_key(f"pk_{table}", table, ["tenant_id", *cols] if new else list(cols))
    for table, name, cols in _UNIQUES:
        op.create_unique_constraint(name, table, ["tenant_id", *cols] if new else list(cols))
    for table, name, old, fresh in _FKS:
        op.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {fresh if new else old}')
    for name, table, old_cols, new_cols in _INDEXES:
        op.drop_index(name, table_name=table)
        op.create_index(name, table, list(new_cols if new else old_cols))


def upgrade() -> None:
    _rekey(new=True)
    for table in _PKS:
        op.drop_index(f"ix_{table}_tenant_id", table_name=table)
    count = partitions.requested(context.config.attributes)
    if count:
        conn = op.get_bind()
        for table in _PKS:  # the tenant tables of this revision, parents first
            partitions.rebuild(conn, table, count)


def downgrade() -> None:
    conn = op.get_bind()
    if partitions.partition_count(conn, "sessions"):
        for table in _PKS:
            partitions.rebuild(conn, table, 0)
    for table in _PKS:
        op.create_index(f"ix_{table}_tenant_id", table, ["tenant_id"])
    _rekey(new=False)
