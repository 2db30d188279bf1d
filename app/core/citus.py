"""The schema on Citus: tenant-owned tables distributed by tenant, co-located (migrations only).

When the database has the `citus` extension (a coordinator with workers), `loom-memory
migrate` runs `distribute` after Alembic: every table of the current schema with a
`tenant_id` column that is not yet hash-distributed becomes a distributed table on
`tenant_id`, co-located with `sessions`, and `tenants` and `api_keys` become reference
tables (a copy on every node). It finds the tables by their column, not from a list, so a
table a later migration adds is distributed by the next `migrate`; it is idempotent (a
schema already distributed costs one catalog read).

Order matters. A table with a foreign key to a reference table becomes a Citus local
table the moment the key (or the reference table) exists, and a distributed table can
then neither reference it nor be referenced by it. So the step saves and drops every
foreign key touching a table it is about to distribute (and the keys to `tenants`),
turns auto-converted Citus local tables back into plain ones, makes the reference tables,
distributes `sessions` then the rest, and adds the keys back under their own names (the
keys between tenant tables all lead with `tenant_id`: co-located; the others point at a
reference table). All in one transaction: a failure leaves the schema as it was.

The number of shards is Citus's `citus.shard_count` (32 unless the operator sets it,
e.g. `ALTER DATABASE loom SET citus.shard_count = 64` before the first `migrate`).

Triggers: the `loom_guard_*` triggers need `citus.enable_unsafe_triggers` to be created
on (or with) a distributed table; Citus then creates them on every shard, where they run
on the worker that holds the row (migration 0022 makes their lookups read the co-located
shard there). `migrate` sets it for its own transactions (`MIGRATION_SETTINGS`).
"""

from __future__ import annotations

import logging
import re

import sqlalchemy as sa

from app.core.partitions import REFERENCE_TABLES

log = logging.getLogger("loom.citus")

ANCHOR = "sessions"  # every tenant-owned table is co-located with it

# What a migration's transaction sets on a Citus coordinator: DDL on distributed tables
# runs shard by shard on one connection per worker (a migration mixes DDL and reads in
# one transaction, which Citus's parallel mode refuses), and triggers may be created.
MIGRATION_SETTINGS = (
    ("citus.multi_shard_modify_mode", "sequential"),
    ("citus.enable_unsafe_triggers", "on"),
    # a table a migration creates stays a plain table (its keys to `tenants` would make
    # it a Citus local table, which then cannot reference `sessions`) until `distribute`
    ("citus.enable_local_reference_table_foreign_keys", "off"),
)


# Citus refuses a foreign key that would set columns null or default through the
# distribution column's key, even when its column list leaves `tenant_id` alone; such a key
# comes back as a plain one (NO ACTION). The one there is, summaries -> snapshots, loses
# nothing: a snapshot is deleted only with its session's summaries (a session's delete
# cascades to both in one statement; an erasure deletes the summaries first).
_SET_ON_DELETE = re.compile(r"\s+ON DELETE SET (?:NULL|DEFAULT)(?:\s*\([^)]*\))?")


def citus_key(definition: str) -> str:
    """A foreign key's definition as Citus accepts it between co-located tables."""
    return _SET_ON_DELETE.sub("", definition)


# The functions that differ on Citus (`adapt` installs them, `CREATE OR REPLACE`, before
# anything is distributed; a plain PostgreSQL keeps migration 0006's and 0016's):
# - `loom_tsvector_length`, behind messages' generated `search_length`: a SQL function
#   that Citus's planner refuses to plan with parameters ("could not create distributed
#   plan ... parameters in SQL functions") on every append; the same body in PL/pgSQL;
# - the guards' two lookups (`loom_guard_*` call them): a trigger runs on the worker, on
#   the shard that holds the row, where `sessions` and `erasures` are the coordinator's
#   shell tables (reading them would be a distributed query nested in a shard's); they
#   read the co-located shard of the same tenant instead, on the same worker
#   (`loom_colocated`), and the plain table where a table is not distributed;
# - the lock the guards share with an erasure request: the request's
#   `pg_advisory_xact_lock` runs on the coordinator, the guards' on a worker, so on Citus
#   the erasure's row takes the exclusive side where the guards take the shared one: a
#   trigger on `erasures` locks the subject on the worker as the row is inserted.
FUNCTIONS: tuple[str, ...] = (
    """
CREATE OR REPLACE FUNCTION loom_tsvector_length(v tsvector) RETURNS integer
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN -- loom:citus
  RETURN (SELECT coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0)::integer
          FROM unnest(v) AS u);
END $$""",
    """
CREATE OR REPLACE FUNCTION loom_colocated(base regclass, t uuid) RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN -- loom:citus
  IF EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = base
             AND p.partmethod = 'h') THEN
    RETURN shard_name(base, get_shard_id_for_distribution_column(base, t));
  END IF;
  RETURN base::text;
END $$""",
    """
CREATE OR REPLACE FUNCTION loom_subject_erasing(t uuid, k text, s text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  found boolean;
BEGIN -- loom:citus
  PERFORM pg_advisory_xact_lock_shared(hashtextextended('loom-erasure:' || t || ':' || k
                                                        || ':' || s, 0));
  EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s e WHERE e.tenant_id = $1 AND e.kind = $2 '
                 'AND e.subject = $3 AND e.status = ''running'')',
                 loom_colocated('erasures', t))
    INTO found USING t, k, s;
  RETURN found;
END $$""",
    """
CREATE OR REPLACE FUNCTION loom_session_erased(t uuid, sid uuid) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  live boolean;
BEGIN -- loom:citus
  EXECUTE format('SELECT true FROM %s s WHERE s.tenant_id = $1 AND s.id = $2 '
                 'AND s.erasure_id IS NULL FOR KEY SHARE', loom_colocated('sessions', t))
    INTO live USING t, sid;
  RETURN live IS NULL;
END $$""",
    """
CREATE OR REPLACE FUNCTION loom_guard_erasures() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN -- loom:citus
  IF NEW.status = 'running' AND NEW.subject IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock(hashtextextended('loom-erasure:' || NEW.tenant_id || ':'
                                                   || NEW.kind || ':' || NEW.subject, 0));
  END IF;
  RETURN NEW;
END $$""",
)
TRIGGERS: tuple[tuple[str, str, str], ...] = (("erasures", "loom_guard_erasures", "INSERT"),)


def installed(conn: sa.Connection) -> bool:
    """Whether the database has the citus extension."""
    return bool(
        conn.execute(
            sa.text("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')")
        ).scalar_one()
    )


def prepare(conn: sa.Connection) -> None:
    """Set `MIGRATION_SETTINGS` for the current transaction."""
    for name, value in MIGRATION_SETTINGS:
        conn.execute(sa.text("SELECT set_config(:n, :v, true)"), {"n": name, "v": value})


def layout(conn: sa.Connection) -> dict[str, str]:
    """Each Citus table of the current schema: 'hash' (distributed), 'reference' or
    'local' (a Citus local table)."""
    rows = conn.execute(
        sa.text(
            "SELECT c.relname, p.partmethod::text, p.repmodel::text FROM pg_dist_partition p "
            "JOIN pg_class c ON c.oid = p.logicalrelid "
            "WHERE c.relnamespace = current_schema()::regnamespace"
        )
    ).all()
    kinds = {}
    for name, method, model in rows:
        if method == "h":
            kinds[name] = "hash"
        elif model == "t":
            kinds[name] = "reference"
        else:
            kinds[name] = "local"
    return kinds


def tenant_tables(conn: sa.Connection) -> list[str]:
    """The tables of the current schema with a `tenant_id` column, besides the reference
    tables and Citus's own shards (a reference table's placement on the coordinator)."""
    return list(
        conn.execute(
            sa.text(
                "SELECT c.relname FROM pg_class c "
                "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id' "
                "  AND NOT a.attisdropped "
                "WHERE c.relnamespace = current_schema()::regnamespace "
                "AND c.relkind IN ('r', 'p') AND NOT c.relispartition "
                "AND NOT relation_is_a_known_shard(c.oid) "
                "AND c.relname <> ALL(:refs) ORDER BY c.relname"
            ),
            {"refs": list(REFERENCE_TABLES)},
        ).scalars()
    )


def pending(conn: sa.Connection) -> tuple[list[str], list[str]]:
    """(tenant tables not yet distributed, reference tables not yet reference)."""
    kinds = layout(conn)
    tables = [t for t in tenant_tables(conn) if kinds.get(t) != "hash"]
    refs = [t for t in REFERENCE_TABLES if kinds.get(t) != "reference"]
    return tables, refs


_NAME = re.compile(r"CREATE OR REPLACE FUNCTION (\w+)\(")
MARK = "loom:citus"  # in each of FUNCTIONS' bodies: installed already


def adapt(conn: sa.Connection) -> None:
    """Install `FUNCTIONS` and `TRIGGERS`, each once its table or the function it replaces
    exists (a schema migrated part of the way has neither) and unless it is there already
    (its body carries `MARK`). A migration that redefines one of these functions gets the
    Citus version back at the end of `migrate`: change both."""
    q = conn.execute
    new = {"loom_colocated", "loom_guard_erasures"}  # the functions only Citus has
    for sql in FUNCTIONS:
        m = _NAME.search(sql)
        assert m is not None
        body = q(
            sa.text("SELECT string_agg(prosrc, '') FROM pg_proc WHERE proname = :n"),
            {"n": m.group(1)},
        ).scalar_one()
        if (body is None and m.group(1) not in new) or (body is not None and MARK in body):
            continue
        q(sa.text(sql))
    for table, fn, events in TRIGGERS:
        exists = q(
            sa.text(
                "SELECT to_regclass(:t) IS NULL OR EXISTS (SELECT 1 FROM pg_trigger "
                "WHERE tgname = :fn AND tgrelid = to_regclass(:t))"
            ),
            {"fn": fn, "t": table},
        ).scalar_one()
        if not exists:
            q(
                sa.text(
                    f"CREATE TRIGGER {fn} BEFORE {events} ON {table} "
                    f"FOR EACH ROW EXECUTE FUNCTION {fn}()"
                )
            )


def distribute(conn: sa.Connection) -> list[str]:
    """Distribute what is not yet (see the module's docstring); returns what it did, one
    line per table. Runs in the caller's transaction."""
    prepare(conn)
    adapt(conn)
    tables, refs = pending(conn)
    if not tables and not refs:
        return []
    q = conn.execute
    touched = tables + refs
    keys = q(
        sa.text(
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) "
            "FROM pg_constraint WHERE contype = 'f' AND conparentid = 0 "
            "AND (conrelid::regclass::text = ANY(:t) OR confrelid::regclass::text = ANY(:t)) "
            "ORDER BY conrelid::regclass::text, conname"
        ),
        {"t": touched},
    ).all()
    for table, name, _ in keys:
        q(sa.text(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"'))
    kinds = layout(conn)
    for table in touched:
        if kinds.get(table) == "local":  # converted through a key to a reference table
            q(sa.text("SELECT undistribute_table(CAST(:t AS regclass))"), {"t": table})
    done: list[str] = []
    for table in refs:
        q(sa.text("SELECT create_reference_table(CAST(:t AS regclass))"), {"t": table})
        done.append(f"{table}: reference")
    # the anchor first; the tables with triggers last (a populated table's rows are copied
    # into its shards, and the guards read `sessions` and `erasures`)
    triggered = set(
        conn.execute(
            sa.text(
                "SELECT DISTINCT tgrelid::regclass::text FROM pg_trigger WHERE NOT tgisinternal"
            )
        ).scalars()
    )
    order = sorted(tables, key=lambda t: (t != ANCHOR, t in triggered, t))
    for table in order:
        if table == ANCHOR:
            q(
                sa.text("SELECT create_distributed_table(CAST(:t AS regclass), 'tenant_id')"),
                {"t": table},
            )
        else:
            q(
                sa.text(
                    "SELECT create_distributed_table(CAST(:t AS regclass), 'tenant_id', "
                    "colocate_with => :anchor)"
                ),
                {"t": table, "anchor": ANCHOR},
            )
        done.append(f"{table}: distributed by tenant_id, co-located with {ANCHOR}")
    for table, name, definition in keys:
        accepted = citus_key(definition)
        if accepted != definition:
            done.append(f"{table}: {name} without its ON DELETE SET action")
        q(sa.text(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {accepted}'))
    for line in done:
        log.info("citus: %s", line)
    return done
