"""Hash partitioning of the tenant-owned tables by `tenant_id` (migrations only).

Every tenant-owned table has `tenant_id` leading its primary key, unique constraints and
foreign keys (migration 0013), which is what Citus needs to distribute the schema by
tenant and what PostgreSQL's own partitioning needs to split it. `LOOM_PARTITIONS=N` makes
the migrations build those tables hash-partitioned into N partitions on plain PostgreSQL,
the proof that every query names its tenant: a query that does not reads every partition.

The choice is made once, when migration 0013 runs; later migrations read it back from the
database (`partition_count`), so a table they add is partitioned like the rest.

`rebuild` turns a table into a partitioned one (or back): a new table like it, the rows
copied, the old one dropped, then its keys, indexes and the foreign keys pointing at it
added again under their own names. It runs inside the migration's transaction.
"""

from __future__ import annotations

import re

import sqlalchemy as sa

# The tenant-owned tables, parents before children. `tenants` and `api_keys` are the small
# global tables every request reads (Citus reference tables), not in this list.
TENANT_TABLES: tuple[str, ...] = (
    "sessions",
    "messages",
    "memory_states",
    "memory_snapshots",
    "memory_summaries",
    "compression_jobs",
    "idempotency_records",
    "search_stats",
    "search_terms",
    "shared_memory_entries",
    "shared_memory_ref_holders",
    "memory_items",
    "agent_profiles",
    "learned_versions",
    "learned_heads",
    "memory_item_versions",
    "fact_extractions",
    "erasures",
    "context_manifests",
    "llm_usage",
    "tenant_budgets",
)
REFERENCE_TABLES: tuple[str, ...] = ("tenants", "api_keys")

# Marks the few statements that read every tenant on purpose: background sweeps looking for
# work (expired entries, stalled jobs), whose finds are then handled per tenant. On Citus
# they run on every shard; the partitioned test run lets them, and only them, do so.
FAN_OUT = "/* loom:fan-out */"


def requested(attributes: dict[str, object] | None = None) -> int:
    """The partition count asked for: the migration caller's, else `LOOM_PARTITIONS`."""
    value = (attributes or {}).get("partitions")
    if value is None:
        from app.core.config import get_settings

        return get_settings().partitions
    return int(str(value))


def partition_count(conn: sa.Connection, table: str) -> int:
    """How many partitions `table` has (0: not partitioned)."""
    return int(
        conn.execute(
            sa.text(
                "SELECT count(*) FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent "
                "WHERE p.relname = :t AND p.relnamespace = current_schema()::regnamespace"
            ),
            {"t": table},
        ).scalar_one()
    )


def partition_names(table: str, count: int) -> list[str]:
    return [f"{table}_p{i}" for i in range(count)]


_PARTITION = re.compile(r"^(?P<table>[a-z_]+)_p\d+$")


def is_partition(name: str | None) -> bool:
    """Whether `name` is one of the partitions `rebuild` creates (not in the models'
    metadata: Alembic's comparisons leave them out)."""
    m = _PARTITION.match(name or "")
    return bool(m and m.group("table") in TENANT_TABLES)


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """Alembic's `include_name`: compare the models with the parent tables only."""
    return not (type_ == "table" and is_partition(name))


def include_object(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    """Alembic's `include_object`: leave out the foreign keys PostgreSQL keeps per partition
    of a partitioned table a key points at (`<table>_tenant_id_..._fkey<n>`)."""
    if type_ != "foreign_key_constraint" or not reflected:
        return True
    referred = getattr(obj, "referred_table", None)
    return not is_partition(getattr(referred, "name", None))


def rebuild(conn: sa.Connection, table: str, partitions: int) -> None:
    """Rebuild `table` hash-partitioned by tenant_id into `partitions` (0: a plain table),
    keeping its rows, checks, defaults, keys, indexes and the foreign keys that point at it."""
    q = conn.execute
    own = q(
        sa.text(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = CAST(:t AS regclass) AND contype IN ('p', 'u', 'f') "
            "AND conparentid = 0 ORDER BY contype = 'f', contype <> 'p', conname"
        ),
        {"t": table},
    ).all()
    incoming = q(
        sa.text(
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) "
            "FROM pg_constraint "
            "WHERE confrelid = CAST(:t AS regclass) AND conrelid <> confrelid AND contype = 'f' "
            "AND conparentid = 0 ORDER BY conname"
        ),
        {"t": table},
    ).all()
    indexes = q(
        sa.text(
            "SELECT c.relname, pg_get_indexdef(c.oid) FROM pg_index x "
            "JOIN pg_class c ON c.oid = x.indexrelid "
            "WHERE x.indrelid = CAST(:t AS regclass) "
            "AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = c.oid "
            "                AND k.conrelid = x.indrelid) ORDER BY c.relname"
        ),
        {"t": table},
    ).all()
    columns = (
        q(
            sa.text(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name = :t "
                "AND is_generated = 'NEVER' "
                "ORDER BY ordinal_position"
            ),
            {"t": table},
        )
        .scalars()
        .all()
    )

    for src, name, _ in incoming:
        q(sa.text(f'ALTER TABLE {src} DROP CONSTRAINT "{name}"'))
    staged = f"{table}__rebuild"
    tail = " PARTITION BY HASH (tenant_id)" if partitions else ""
    q(
        sa.text(
            f"CREATE TABLE {staged} (LIKE {table} INCLUDING DEFAULTS INCLUDING GENERATED "
            f"INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMMENTS){tail}"
        )
    )
    for i, name in enumerate(partition_names(table, partitions)):
        q(
            sa.text(
                f"CREATE TABLE {name} PARTITION OF {staged} "
                f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {i})"
            )
        )
    cols = ", ".join(f'"{c}"' for c in columns)
    q(sa.text(f"INSERT INTO {staged} ({cols}) SELECT {cols} FROM {table}"))
    q(sa.text(f"DROP TABLE {table}"))
    q(sa.text(f"ALTER TABLE {staged} RENAME TO {table}"))
    for name, definition in own:
        q(sa.text(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}'))
    for _, definition in indexes:
        q(sa.text(definition.replace(" ON ONLY ", " ON ", 1)))
    for src, name, definition in incoming:
        q(sa.text(f'ALTER TABLE {src} ADD CONSTRAINT "{name}" {definition}'))
