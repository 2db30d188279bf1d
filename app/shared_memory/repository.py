"""SQL for shared memory. Every query is filtered by tenant, except the cleanup sweep.

"Live" = not expired, or still referenced by a message (a holder row): an expired entry is
never returned, even before the cleanup job has deleted it.

Every function runs SQL on an asyncpg connection: a route's (`app.auth.deps.DbDep`, inside its
transaction), the message append's its own (`app.shared_memory.offload`). Entries come back
as `EntryRow`, whose select list comes from the table model (`ENTRY_ROW_COLUMNS`), with
their stored bytes beside it when a read asks for them; no ORM instance is read or built.
"""

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from app.core import pg
from app.core.partitions import FAN_OUT
from app.core.pg import dumps, positional
from app.models.shared_memory_entry import ENTRY_ROW_COLUMNS, EntryRow

_HEAD = ", ".join(ENTRY_ROW_COLUMNS)
_NEXT_VERSION = "nextval('shared_memory_version_seq')"


@dataclass(frozen=True, slots=True)
class Addr:
    tenant_id: uuid.UUID
    namespace: str
    scope_id: str
    storage_key: str


def _args(a: Addr) -> tuple[uuid.UUID, str, str, str]:
    return (a.tenant_id, a.namespace, a.scope_id, a.storage_key)


# A message holds the entry's reference (the tenant is $1). Correlated to the outer entry
# row by the table's name (in an upsert's DO UPDATE SET: the row already there).
_HELD = """EXISTS (SELECT FROM shared_memory_ref_holders h
        WHERE h.tenant_id = $1 AND h.entry_id = shared_memory_entries.id)"""
# Live at the moment `$now` (a placeholder each statement numbers).
# (Columns are named with their table: an upsert's DO UPDATE also sees `excluded`'s.)
_LIVE = f"""(shared_memory_entries.expires_at IS NULL
       OR shared_memory_entries.expires_at > $now OR {_HELD})"""
# The entry at an address ($1-$4) that is live at $5.
_AT_LIVE = f"""tenant_id = $1 AND namespace = $2 AND scope_id = $3 AND storage_key = $4
  AND {_LIVE.replace("$now", "$5")}"""

# What a write sets, in this order after the address ($1-$4) and `now` ($5).
_WRITE_FIELDS = (
    "value",
    "content_type",
    "metadata",
    "sha256",
    "compressed",
    "size_bytes",
    "stored_bytes",
    "writer_agent_id",
    "expires_at",
)


def _write_args(fields: dict[str, Any]) -> list[Any]:
    return [dumps(fields[f]) if f == "metadata" else fields[f] for f in _WRITE_FIELDS]


_GET = f"SELECT {_HEAD}, value FROM shared_memory_entries WHERE {_AT_LIVE}"


async def get(conn: asyncpg.Connection, a: Addr, now: datetime) -> tuple[EntryRow, bytes] | None:
    """The live entry at `a` and its stored bytes, or None."""
    row = await conn.fetchrow(_GET, *_args(a), now)
    return None if row is None else (EntryRow._make(row[:-1]), row[-1])


_CURRENT = f"SELECT version, {_HELD} FROM shared_memory_entries WHERE {_AT_LIVE}"


async def current(conn: asyncpg.Connection, a: Addr, now: datetime) -> tuple[int, bool] | None:
    """(version, held by a message?) of the live entry at `a`, or None."""
    row = await conn.fetchrow(_CURRENT, *_args(a), now)
    return None if row is None else (row[0], row[1])


_GET_BY_REF = f"""
SELECT {_HEAD}, value FROM shared_memory_entries
WHERE tenant_id = $1 AND ref_id = $2 AND {_LIVE.replace("$now", "$3")}
"""


async def get_by_ref(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, ref_id: str, now: datetime
) -> tuple[EntryRow, bytes] | None:
    """The live entry with the reference id `ref_id` and its stored bytes, or None."""
    row = await conn.fetchrow(_GET_BY_REF, tenant_id, ref_id, now)
    return None if row is None else (EntryRow._make(row[:-1]), row[-1])


def _insert(first: int) -> str:
    """INSERT of a new entry: the address $1-$4, the written fields from $`first` on, then
    the reference id and the row id."""
    values = ", ".join(f"${i}" for i in range(first, first + len(_WRITE_FIELDS)))
    ref, row_id = first + len(_WRITE_FIELDS), first + len(_WRITE_FIELDS) + 1
    return f"""
INSERT INTO shared_memory_entries (id, tenant_id, namespace, scope_id, storage_key, ref_id,
    {", ".join(_WRITE_FIELDS)}, version, updated_at)
VALUES (${row_id}, $1, $2, $3, $4, ${ref}, {values}, {_NEXT_VERSION}, now())"""


# The reference id is the entry's identity for messages: a replace keeps it. A dead
# (expired) row being overwritten is a new entry: its created_at restarts.
_UPSERT = f"""{_insert(6)}
ON CONFLICT ON CONSTRAINT uq_shared_memory_entries_address DO UPDATE
SET {", ".join(f"{f} = excluded.{f}" for f in _WRITE_FIELDS)},
    version = {_NEXT_VERSION}, updated_at = now(),
    created_at = CASE WHEN {_LIVE.replace("$now", "$5")} THEN shared_memory_entries.created_at
                      ELSE now() END
{{where}}
RETURNING {_HEAD}
"""
_UPSERT_ANY = _UPSERT.format(where="")
_UPSERT_IF_DEAD = _UPSERT.format(where=f"WHERE NOT {_LIVE.replace('$now', '$5')}")


# On Citus (`pg.on_citus`) an upsert's DO UPDATE may call no function but immutable ones
# and hold no subquery, and `nextval` runs where the statement runs (on the worker, where
# the sequence is not): the version comes from the coordinator first (`next_version`),
# whether the entry there is live is read before (a router read), and the upsert takes
# both as parameters. Three round trips instead of one; the same rows.
_LIVE_AT = f"SELECT {_LIVE.replace('$now', '$5')} FROM shared_memory_entries WHERE " + (
    "tenant_id = $1 AND namespace = $2 AND scope_id = $3 AND storage_key = $4"
)
_N = 5 + len(_WRITE_FIELDS)  # $1-$4 the address, then the fields, then these
_UPSERT_CITUS = f"""
INSERT INTO shared_memory_entries (id, tenant_id, namespace, scope_id, storage_key, ref_id,
    {", ".join(_WRITE_FIELDS)}, version, updated_at, created_at)
VALUES (${_N + 1}, $1, $2, $3, $4, ${_N},
        {", ".join(f"${i}" for i in range(5, _N))}, ${_N + 2}, now(), now())
ON CONFLICT ON CONSTRAINT uq_shared_memory_entries_address DO UPDATE
SET {", ".join(f"{f} = excluded.{f}" for f in _WRITE_FIELDS)},
    version = excluded.version, updated_at = excluded.updated_at,
    created_at = CASE WHEN ${_N + 3} THEN shared_memory_entries.created_at
                      ELSE excluded.created_at END
{{where}}
RETURNING {_HEAD}
"""
_UPSERT_CITUS_ANY = _UPSERT_CITUS.format(where="")
_UPSERT_CITUS_IF_DEAD = _UPSERT_CITUS.format(where=f"WHERE NOT ${_N + 3}")


async def upsert(
    conn: asyncpg.Connection,
    a: Addr,
    fields: dict[str, Any],
    now: datetime,
    *,
    only_if_dead: bool = False,
) -> EntryRow | None:
    """Insert or replace the entry; returns the row, or None if `only_if_dead` and a live
    entry exists (create-only PUT)."""
    if pg.on_citus():
        live = bool(await conn.fetchval(_LIVE_AT, *_args(a), now))
        version = await next_version(conn)
        row = await conn.fetchrow(
            _UPSERT_CITUS_IF_DEAD if only_if_dead else _UPSERT_CITUS_ANY,
            *_args(a),
            *_write_args(fields),
            fields["ref_id"],
            uuid.uuid4(),
            version,
            live,
        )
        return None if row is None else EntryRow._make(row)
    row = await conn.fetchrow(
        _UPSERT_IF_DEAD if only_if_dead else _UPSERT_ANY,
        *_args(a),
        now,
        *_write_args(fields),
        fields["ref_id"],
        uuid.uuid4(),
    )
    return None if row is None else EntryRow._make(row)


# A new entry at an address nobody holds (an offloaded tool result's fresh key).
_CREATE = f"""{_insert(5)}
ON CONFLICT ON CONSTRAINT uq_shared_memory_entries_address DO NOTHING
RETURNING {_HEAD}
"""


async def create(conn: asyncpg.Connection, a: Addr, fields: dict[str, Any]) -> EntryRow | None:
    """Insert a new entry at `a` (the `fields` of `upsert`); the row, or None when `a` is
    taken."""
    row = await conn.fetchrow(
        _CREATE, *_args(a), *_write_args(fields), fields["ref_id"], uuid.uuid4()
    )
    return None if row is None else EntryRow._make(row)


_UPDATE_IF_VERSION = f"""
UPDATE shared_memory_entries
SET {", ".join(f"{f} = ${i}" for i, f in enumerate(_WRITE_FIELDS, start=6))},
    version = {{version}}, updated_at = now()
WHERE {_AT_LIVE} AND version = ${6 + len(_WRITE_FIELDS)}
RETURNING {_HEAD}
"""
_UPDATE_IF_VERSION_PG = _UPDATE_IF_VERSION.format(version=_NEXT_VERSION)
# Citus: the new version a parameter, taken on the coordinator (see `_UPSERT_CITUS`)
_UPDATE_IF_VERSION_CITUS = _UPDATE_IF_VERSION.format(version=f"${7 + len(_WRITE_FIELDS)}")


async def update_if_version(
    conn: asyncpg.Connection, a: Addr, expected: int, fields: dict[str, Any], now: datetime
) -> EntryRow | None:
    """Compare-and-set: replace only if the live entry is still at `expected`."""
    args = [*_args(a), now, *_write_args(fields), expected]
    if pg.on_citus():
        row = await conn.fetchrow(_UPDATE_IF_VERSION_CITUS, *args, await next_version(conn))
    else:
        row = await conn.fetchrow(_UPDATE_IF_VERSION_PG, *args)
    return None if row is None else EntryRow._make(row)


_DELETE = f"""
DELETE FROM shared_memory_entries WHERE {_AT_LIVE} AND NOT {_HELD}
RETURNING version
"""
_DELETE_AT_VERSION = f"""
DELETE FROM shared_memory_entries WHERE {_AT_LIVE} AND NOT {_HELD} AND version = $6
RETURNING version
"""


async def delete(
    conn: asyncpg.Connection, a: Addr, now: datetime, expected: int | None
) -> int | None:
    """Delete the live, unreferenced entry (at `expected` if given); returns the version it
    had, or None."""
    if expected is None:
        version = await conn.fetchval(_DELETE, *_args(a), now)
    else:
        version = await conn.fetchval(_DELETE_AT_VERSION, *_args(a), now, expected)
    return None if version is None else int(version)


async def next_version(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval(f"SELECT {_NEXT_VERSION}"))


def _list_sql(prefix: bool, after: bool) -> str:
    # one statement per filter combination, each numbering only the parameters it takes
    # (`pg.positional`; `_LIVE`'s tenant, `$1` elsewhere, is named here like the others)
    where = [
        "tenant_id = :tenant AND namespace = :namespace AND scope_id = :scope",
        _LIVE.replace("$now", ":now").replace("$1", ":tenant"),
    ]
    if prefix:
        where.append("starts_with(storage_key, :prefix)")
    if after:
        where.append('storage_key COLLATE "C" > :after')
    return positional(f"""
SELECT {_HEAD} FROM shared_memory_entries
WHERE {" AND ".join(where)}
ORDER BY storage_key COLLATE "C" LIMIT :limit
""")[0]


# every filter combination's statement, written once at import
_LIST_SQL = {(p, f): _list_sql(p, f) for p in (False, True) for f in (False, True)}


async def list_keys(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    namespace: str,
    scope_id: str,
    prefix: str,
    after: str | None,
    limit: int,
    now: datetime,
) -> list[EntryRow]:
    """Live entries whose storage key starts with `prefix`, in storage-key order."""
    args: list[Any] = [tenant_id, namespace, scope_id, now]
    if prefix:
        args.append(prefix)
    if after is not None:
        args.append(after)
    rows = await conn.fetch(_LIST_SQL[bool(prefix), after is not None], *args, limit)
    return [EntryRow._make(r) for r in rows]


# Live entries the caller may see, per namespace ($1 tenant, $2 now, $3 the caller's agent
# or ''): the agent namespace counts only the caller's own scope (none without an agent).
_TOTALS = f"""
SELECT namespace, count(*), coalesce(sum(size_bytes), 0), coalesce(sum(stored_bytes), 0)
FROM shared_memory_entries
WHERE tenant_id = $1 AND {_LIVE.replace("$now", "$2")}
  AND (namespace <> 'agent' OR scope_id = $3) {{own}}
GROUP BY namespace
"""
_TOTALS_ALL = _TOTALS.format(own="")
_TOTALS_OWN = _TOTALS.format(
    own="""AND (namespace <> 'session' OR scope_id IN (
      SELECT CAST(s.id AS TEXT) FROM sessions s WHERE s.tenant_id = $1 AND s.agent_id = $3))"""
)


async def namespace_totals(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    agent_id: str | None,
    now: datetime,
    *,
    own_sessions_only: bool,
) -> list[tuple[str, int, int, int]]:
    """(namespace, keys, bytes, stored_bytes) of live entries the caller may see.

    `own_sessions_only` (agent keys): the session namespace counts only the scopes of the
    agent's own sessions (the visibility rule of `app.sessions.access`)."""
    sql = _TOTALS_OWN if own_sessions_only else _TOTALS_ALL
    rows = await conn.fetch(sql, tenant_id, now, agent_id or "")
    return [(r[0], int(r[1]), int(r[2]), int(r[3])) for r in rows]


_ENTRY_IDS = """
SELECT ref_id, id FROM shared_memory_entries WHERE tenant_id = $1 AND ref_id = ANY($2::text[])
"""
_ADD_HOLDERS = """
INSERT INTO shared_memory_ref_holders (entry_id, session_id, seq, tenant_id)
SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::bigint[], $4::uuid[])
ON CONFLICT DO NOTHING
"""


async def hold(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    held: list[tuple[int, str]],
) -> None:
    """Record that the messages `held` ((seq, ref_id), of `session_id`) hold the entries
    with those reference ids (of `tenant_id`; unknown ids are skipped), on an asyncpg
    connection (the message append's transaction)."""
    ids = dict(await conn.fetch(_ENTRY_IDS, tenant_id, [r for _, r in held]))
    rows = [(ids[ref], seq) for seq, ref in held if ref in ids]
    if rows:
        await conn.execute(
            _ADD_HOLDERS,
            [e for e, _ in rows],
            [session_id] * len(rows),
            [s for _, s in rows],
            [tenant_id] * len(rows),
        )


# Expired, unreferenced entries of any tenant, claimed with SKIP LOCKED, oldest first.
_DELETE_EXPIRED = f"""
DELETE {FAN_OUT} FROM shared_memory_entries
WHERE (tenant_id, id) IN (
  SELECT v.tenant_id, v.id FROM (
    SELECT e.tenant_id, e.id FROM shared_memory_entries e
    WHERE e.expires_at <= $1 AND NOT EXISTS (
      SELECT FROM shared_memory_ref_holders h
      WHERE h.tenant_id = e.tenant_id AND h.entry_id = e.id)
    ORDER BY e.expires_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED) v)
RETURNING {_HEAD}
"""


# Citus runs no FOR UPDATE across shards: the sweep finds the expired entries of every
# tenant (on every shard, unlocked), then deletes each tenant's with the same conditions
# checked again (one shard each); a sweep racing another waits on a row instead of
# skipping it.
_EXPIRED = f"""
SELECT {FAN_OUT} e.tenant_id, e.id FROM shared_memory_entries e
WHERE e.expires_at <= $1 AND NOT EXISTS (
  SELECT FROM shared_memory_ref_holders h
  WHERE h.tenant_id = e.tenant_id AND h.entry_id = e.id)
ORDER BY e.expires_at
LIMIT $2
"""
_DELETE_EXPIRED_OF = f"""
DELETE FROM shared_memory_entries e
WHERE e.tenant_id = $1 AND e.id = ANY($2::uuid[]) AND e.expires_at <= $3 AND NOT EXISTS (
  SELECT FROM shared_memory_ref_holders h WHERE h.tenant_id = $1 AND h.entry_id = e.id)
RETURNING {_HEAD}
"""


async def delete_expired(conn: asyncpg.Connection, now: datetime, limit: int) -> list[EntryRow]:
    """Delete up to `limit` expired, unreferenced entries of any tenant (maintenance sweep)."""
    if not pg.on_citus():
        return [EntryRow._make(r) for r in await conn.fetch(_DELETE_EXPIRED, now, limit)]
    found: dict[uuid.UUID, list[uuid.UUID]] = {}
    for tenant_id, entry_id in await conn.fetch(_EXPIRED, now, limit):
        found.setdefault(tenant_id, []).append(entry_id)
    return [
        EntryRow._make(r)
        for tenant_id, ids in found.items()
        for r in await conn.fetch(_DELETE_EXPIRED_OF, tenant_id, ids, now)
    ]
