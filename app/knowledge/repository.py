"""SQL for memory items and learned versions. Every statement names the tenant.

Every function runs SQL text on an asyncpg connection and returns typed rows
(`MemoryItemRow`, `LearnedVersionRow`, `LearnedHeadRow`, `CandidateRow`); no ORM instance is
read or built. The filter AST of ``app.knowledge.filters`` is compiled here to SQL text
(`condition_sql`) with `app.core.pg.Params`, so filtering, ordering and paging all run in
PostgreSQL; the visibility rule is `readable_sql`, the one condition of every item read.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import asyncpg

from app.core import pg
from app.knowledge.filters import Condition, OrderBy
from app.knowledge.scopes import Scope, parse_scope
from app.models.learned import (
    LEARNED_HEAD_ROW_COLUMNS,
    LEARNED_VERSION_ROW_COLUMNS,
    LearnedHeadRow,
    LearnedVersionRow,
)
from app.models.memory_item import MEMORY_ITEM_ROW_COLUMNS, MemoryItemRow
from app.users import access as users_access


def item_columns(m: str = "m") -> str:
    """The select list of a `MemoryItemRow` on alias `m`."""
    return ", ".join(f"{m}.{c}" for c in MEMORY_ITEM_ROW_COLUMNS)


_ITEM = item_columns()
_ITEM_D = item_columns("d")


def _items(rows: Sequence[asyncpg.Record]) -> list[MemoryItemRow]:
    return [MemoryItemRow._make(r) for r in rows]


# --- the rules, as SQL text ----------------------------------------------------------------


def scope_sql(p: pg.Params, scope: Scope, m: str = "m") -> str:
    """Items of exactly one scope on alias `m` (the unresolved ``agent`` / ``user`` scope:
    that tier, which `readable_sql` narrows to what the caller may see), its values added
    to `p`."""
    kind = p.add(scope.kind, "scope_kind")
    if scope.kind in ("agent", "user") and scope.id is None:
        return f"{m}.scope_kind = {kind}"
    return f"({m}.scope_kind = {kind} AND {m}.scope_id = {p.add(scope.storage_id, 'scope_id')})"


def readable_sql(
    p: pg.Params,
    tenant_id: uuid.UUID,
    agent_id: str | None,
    *,
    include_invalidated: bool = True,
    every_user: bool = False,
    m: str = "m",
) -> str:
    """The items a caller may read, on alias `m` (memory_items), its values added to `p`:
    its tenant's, except other agents' ``agent`` tiers (a caller acting for no agent sees
    no agent tier) and the ``user`` tiers of people the caller may not see
    (`app.users.access`: ``every_user`` for service and admin keys, else only users
    ``agent_id`` has a session with). With ``include_invalidated`` False, superseded facts
    are left out too. Every item read goes through this."""
    tenant = p.add(tenant_id, "tenant_id")
    agent = None if agent_id is None else p.add(agent_id, "agent_id")
    parts = [f"{m}.tenant_id = {tenant}"]
    if agent is None:
        parts.append(f"{m}.scope_kind <> 'agent'")
    else:
        parts.append(f"({m}.scope_kind <> 'agent' OR {m}.scope_id = {agent})")
    if not every_user:
        knows = users_access.knows_user_sql(tenant, agent, f"{m}.scope_id")
        parts.append(f"({m}.scope_kind <> 'user' OR {knows})")
    if not include_invalidated:
        parts.append(f"{m}.invalid_at IS NULL")
    return " AND ".join(parts)


def valid_at_sql(p: pg.Params, tenant_id: uuid.UUID, at: datetime, m: str = "m") -> str:
    """A tenant's items true at `at` (world time), on alias `m`: taken effect by then (their
    earliest version's `valid_from`, else their own, else their creation) and not invalid
    yet (`app.knowledge.asof`; the versions read names the tenant: one partition)."""
    tenant, when = p.add(tenant_id, "tenant_id"), p.add(at, "as_of")
    earliest = (
        "(SELECT min(v.valid_from) FROM memory_item_versions v "
        f"WHERE v.tenant_id = {tenant} AND v.item_id = {m}.id)"
    )
    return (
        f"coalesce(least({m}.valid_from, {earliest}), {m}.created_at) <= {when} "
        f"AND ({m}.invalid_at IS NULL OR {m}.invalid_at > {when})"
    )


# the filterable columns (`app.knowledge.filters.FIELDS` but `scope`) and the array type of
# a list of their values (`token_cost`'s as float8: a filter may give it 1.5, which an int
# array would truncate)
_ARRAY_TYPES: dict[str, str] = {
    "id": "uuid[]",
    "kind": "text[]",
    "source": "text[]",
    "text": "text[]",
    "tags": "text[]",
    "importance": "float8[]",
    "token_cost": "float8[]",
    "created_at": "timestamptz[]",
    "updated_at": "timestamptz[]",
}
_COMPARE = {"eq": "=", "ne": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def _typed(p: pg.Params, value: Any, hint: str) -> str:
    """A bind for a filter's value, cast to the value's own type (a float compared with an
    integer column stays a float: `token_cost < 1.5` is not `token_cost < 1`)."""
    name = p.add(value, hint)
    if isinstance(value, float):
        return f"{name}::float8"
    if isinstance(value, int):
        return f"{name}::int8"
    if isinstance(value, datetime):
        return f"{name}::timestamptz"
    if isinstance(value, uuid.UUID):
        return f"{name}::uuid"
    return f"{name}::text"


def condition_sql(p: pg.Params, c: Condition, m: str = "m") -> str:
    """One AST condition as SQL on alias `m`, its values added to `p`."""
    if c.field == "scope":
        scopes = [parse_scope(v) for v in (c.value if isinstance(c.value, tuple) else (c.value,))]
        any_of = "(" + " OR ".join(scope_sql(p, s, m) for s in scopes) + ")"
        return any_of if c.op in ("eq", "in") else f"NOT {any_of}"
    column = f"{m}.{c.field}"
    array = _ARRAY_TYPES[c.field]
    op, v = c.op, c.value
    if op == "any":
        return f"{column} && {p.add(list(v), c.field)}::{array}"  # tags && ARRAY[...] (GIN)
    if op == "none":
        return f"NOT ({column} && {p.add(list(v), c.field)}::{array})"
    if op == "is_null":
        return f"{column} IS NULL"
    if op == "not_null":
        return f"{column} IS NOT NULL"
    if op == "in":
        return f"{column} = ANY({p.add(list(v), c.field)}::{array})"
    if op == "nin":
        return f"{column} <> ALL({p.add(list(v), c.field)}::{array})"
    return f"{column} {_COMPARE[op]} {_typed(p, v, c.field)}"


def where_sql(
    p: pg.Params,
    tenant_id: uuid.UUID,
    conditions: Sequence[Condition],
    scope: Scope | None = None,
    m: str = "m",
) -> str:
    """The tenant's items matching `conditions` (and in `scope`), on alias `m`."""
    parts = [f"{m}.tenant_id = {p.add(tenant_id, 'tenant_id')}"]
    parts += [condition_sql(p, c, m) for c in conditions]
    if scope is not None:
        parts.append(scope_sql(p, scope, m))
    return " AND ".join(parts)


def _valid_sql(p: pg.Params, tenant_id: uuid.UUID, as_of: datetime | None) -> str:
    """Items valid now, or at `as_of` (a package's)."""
    return "m.invalid_at IS NULL" if as_of is None else valid_at_sql(p, tenant_id, as_of)


# --- items ---------------------------------------------------------------------------------

_INSERT = f"""
INSERT INTO memory_items ({", ".join(MEMORY_ITEM_ROW_COLUMNS)})
VALUES ({", ".join(f"${i + 1}" for i in range(len(MEMORY_ITEM_ROW_COLUMNS)))})
RETURNING {", ".join(MEMORY_ITEM_ROW_COLUMNS)}
"""
_JSON_FIELDS = {"payload", "sources"}


async def add(conn: asyncpg.Connection, item: MemoryItemRow) -> MemoryItemRow:
    """Insert `item` (every column as given); the stored row."""
    values = [
        pg.dumps(v) if f in _JSON_FIELDS else v for f, v in zip(item._fields, item, strict=True)
    ]
    row = await conn.fetchrow(_INSERT, *values)
    assert row is not None  # RETURNING the inserted row
    return MemoryItemRow._make(row)


async def get(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    item_id: uuid.UUID,
    *,
    agent_id: str | None,
    for_update: bool = False,
    every_user: bool = False,
) -> MemoryItemRow | None:
    """The item if the caller may read it (with `for_update`, its row locked)."""
    p = pg.Params(id=item_id)
    where = readable_sql(p, tenant_id, agent_id, every_user=every_user)
    lock = " FOR UPDATE" if for_update else ""
    row = await conn.fetchrow(
        *p.sql(f"SELECT {_ITEM} FROM memory_items m WHERE {where} AND m.id = :id{lock}")
    )
    return None if row is None else MemoryItemRow._make(row)


_GET_ROWS = f"SELECT {_ITEM} FROM memory_items m WHERE m.tenant_id = $1 AND m.id = ANY($2::uuid[])"


async def get_rows(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID]
) -> list[MemoryItemRow]:
    """Full items by id (no visibility rule: ids a package or a manifest chose)."""
    if not ids:
        return []
    return _items(await conn.fetch(_GET_ROWS, tenant_id, list(ids)))


async def get_many(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    ids: Sequence[uuid.UUID],
    *,
    agent_id: str | None,
    every_user: bool = False,
) -> list[MemoryItemRow]:
    if not ids:
        return []
    p = pg.Params(ids=list(ids))
    where = readable_sql(p, tenant_id, agent_id, every_user=every_user)
    sql = f"SELECT {_ITEM} FROM memory_items m WHERE {where} AND m.id = ANY(:ids::uuid[])"
    return _items(await conn.fetch(*p.sql(sql)))


async def delete(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    item_id: uuid.UUID,
    *,
    agent_id: str | None,
    every_user: bool = False,
) -> MemoryItemRow | None:
    """The deleted item (every column, for its `delete` version), or None."""
    p = pg.Params(id=item_id)
    where = readable_sql(p, tenant_id, agent_id, every_user=every_user)
    row = await conn.fetchrow(
        *p.sql(f"DELETE FROM memory_items m WHERE {where} AND m.id = :id RETURNING {_ITEM}")
    )
    return None if row is None else MemoryItemRow._make(row)


_UPDATE_SCOPE = f"""
UPDATE memory_items m SET scope_kind = $3, scope_id = $4, updated_at = $5,
                          version = m.version + 1
WHERE m.tenant_id = $1 AND m.id = $2
RETURNING {_ITEM}
"""


async def move_one(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, item_id: uuid.UUID, to: Scope, now: datetime
) -> MemoryItemRow | None:
    """Move one item to another scope as its next version (promotion keeps the id)."""
    row = await conn.fetchrow(_UPDATE_SCOPE, tenant_id, item_id, to.kind, to.storage_id, now)
    return None if row is None else MemoryItemRow._make(row)


async def query(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    conditions: Sequence[Condition],
    order: OrderBy,
    limit: int,
    after: tuple[Any, uuid.UUID] | None,
    *,
    agent_id: str | None,
    include_invalidated: bool = False,
    as_of: datetime | None = None,
    every_user: bool = False,
) -> list[MemoryItemRow]:
    """One page of matching items; ``after`` is the keyset (order value, id) of the last row.
    ``as_of``: only items valid then, invalidated or not now."""
    p = pg.Params()
    parts = [
        where_sql(p, tenant_id, conditions),
        readable_sql(
            p,
            tenant_id,
            agent_id,
            include_invalidated=include_invalidated or as_of is not None,
            every_user=every_user,
        ),
    ]
    if as_of is not None:
        parts.append(valid_at_sql(p, tenant_id, as_of))
    column = f"m.{order.field}"
    if after is not None:
        cmp = "<" if order.descending else ">"
        value, last = _typed(p, after[0], "after_value"), p.add(after[1], "after_id")
        parts.append(f"({column}, m.id) {cmp} ({value}, {last})")
    direction = "DESC" if order.descending else "ASC"
    sql = (
        f"SELECT {_ITEM} FROM memory_items m WHERE {' AND '.join(parts)} "
        f"ORDER BY {column} {direction}, m.id {direction} LIMIT {p.add(limit, 'limit')}"
    )
    return _items(await conn.fetch(*p.sql(sql)))


async def lock_scope(conn: asyncpg.Connection, tenant_id: uuid.UUID, scope: Scope) -> None:
    """Serialise writers of one scope for this transaction (eviction must not race)."""
    key = f"knowledge:{tenant_id}:{scope}"
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", key)


async def count(conn: asyncpg.Connection, tenant_id: uuid.UUID, scope: Scope) -> int:
    p = pg.Params()
    where = where_sql(p, tenant_id, (), scope)
    return int(await conn.fetchval(*p.sql(f"SELECT count(*) FROM memory_items m WHERE {where}")))


async def evict_lowest(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, scope: Scope, n: int
) -> list[MemoryItemRow]:
    """Delete the ``n`` lowest-importance, oldest items (ties by id), as eviction.py orders;
    the deleted rows."""
    if n <= 0:
        return []
    p = pg.Params()
    tenant, where = p.add(tenant_id, "tenant_id"), where_sql(p, tenant_id, (), scope)
    sql = (
        f"DELETE FROM memory_items d WHERE d.tenant_id = {tenant} AND d.id IN ("
        f"SELECT m.id FROM memory_items m WHERE {where} "
        f"ORDER BY m.importance ASC, m.created_at ASC, m.id ASC LIMIT {p.add(n, 'n')}) "
        f"RETURNING {_ITEM_D}"
    )
    return _items(await conn.fetch(*p.sql(sql)))


async def clear(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    scope: Scope,
    conditions: Sequence[Condition] = (),
    keep: Sequence[uuid.UUID] = (),
) -> list[MemoryItemRow]:
    """Delete the scope's (matching) items except ``keep``; the deleted rows."""
    p = pg.Params()
    where = where_sql(p, tenant_id, conditions, scope)
    if keep:
        where += f" AND m.id <> ALL({p.add(list(keep), 'keep')}::uuid[])"
    sql = f"DELETE FROM memory_items m WHERE {where} RETURNING {_ITEM}"
    return _items(await conn.fetch(*p.sql(sql)))


class CandidateRow(NamedTuple):
    """What a package ranks an item by (`app.knowledge.packages`)."""

    id: uuid.UUID
    scope_kind: str
    importance: float
    created_at: datetime
    token_cost: int


_CANDIDATE = "m.id, m.scope_kind, m.importance, m.created_at, m.token_cost"


async def tier_totals(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    scopes: Sequence[Scope],
    conditions: Sequence[Condition],
    as_of: datetime | None = None,
) -> dict[str, tuple[int, int]]:
    """scope kind -> (count, sum of token_cost) of the matching items, in one query.

    ``scopes`` holds at most one scope per kind (a package's task, project and global).
    """
    if not scopes:
        return {}
    p = pg.Params()
    where = where_sql(p, tenant_id, conditions)
    any_scope = " OR ".join(scope_sql(p, s) for s in scopes)
    sql = (
        "SELECT m.scope_kind, count(*), coalesce(sum(m.token_cost), 0) FROM memory_items m "
        f"WHERE {where} AND ({any_scope}) AND {_valid_sql(p, tenant_id, as_of)} "
        "GROUP BY m.scope_kind"
    )
    return {kind: (int(n), int(tokens)) for kind, n, tokens in await conn.fetch(*p.sql(sql))}


async def tier_candidates(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    scopes: Sequence[tuple[Scope, int]],
    conditions: Sequence[Condition],
    *,
    limit: int,
    as_of: datetime | None = None,
) -> list[CandidateRow]:
    """Light rows (id, scope_kind, importance, created_at, token_cost) in one query.

    Per (scope, max_cost): the items that could fit (token_cost <= max_cost), the best
    ``limit`` of each scope in package rank order (importance desc, newest first, id).
    """
    if not scopes:
        return []
    p = pg.Params()
    where = where_sql(p, tenant_id, conditions)
    fits = " OR ".join(
        f"({scope_sql(p, s)} AND m.token_cost <= {p.add(cap, 'cap')})" for s, cap in scopes
    )
    sql = (
        "SELECT id, scope_kind, importance, created_at, token_cost FROM ("
        f"SELECT {_CANDIDATE}, row_number() OVER (PARTITION BY m.scope_kind "
        "ORDER BY m.importance DESC, m.created_at DESC, m.id ASC) AS rn "
        f"FROM memory_items m WHERE {where} AND ({fits}) AND {_valid_sql(p, tenant_id, as_of)}"
        f") ranked WHERE rn <= {p.add(limit, 'limit')}"
    )
    return [CandidateRow._make(r) for r in await conn.fetch(*p.sql(sql))]


async def head_tail_candidates(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    scope: Scope,
    conditions: Sequence[Condition],
    *,
    max_cost: int,
    n: int,
    as_of: datetime | None = None,
) -> list[CandidateRow]:
    """The ``n`` oldest and ``n`` newest items of a scope that could fit ``max_cost``."""
    p = pg.Params()
    where = where_sql(p, tenant_id, conditions, scope)
    base = (
        f"SELECT {_CANDIDATE} FROM memory_items m WHERE {where} "
        f"AND m.token_cost <= {p.add(max_cost, 'max_cost')} AND {_valid_sql(p, tenant_id, as_of)}"
    )
    limit = p.add(n, "n")
    rows: dict[uuid.UUID, CandidateRow] = {}
    for order in ("m.created_at ASC, m.id ASC", "m.created_at DESC, m.id DESC"):
        for r in await conn.fetch(*p.sql(f"{base} ORDER BY {order} LIMIT {limit}")):
            rows[r["id"]] = CandidateRow._make(r)
    return list(rows.values())


# --- learned layer -----------------------------------------------------------------------

_HEAD = ", ".join(LEARNED_HEAD_ROW_COLUMNS)
_LEARNED = ", ".join(f"v.{c}" for c in LEARNED_VERSION_ROW_COLUMNS)

# the inserted row's time in DO UPDATE, not now(): Citus calls no function but immutable
# ones in an upsert's DO UPDATE
_ALLOCATE = f"""
INSERT INTO learned_heads AS h (id, tenant_id, agent_id, active_version, latest_version,
                                updated_at)
VALUES ($1, $2, $3, 1, 1, now())
ON CONFLICT ON CONSTRAINT uq_learned_heads_agent DO UPDATE
SET latest_version = h.latest_version + 1, active_version = h.latest_version + 1,
    updated_at = EXCLUDED.updated_at
RETURNING {_HEAD}
"""


async def allocate_learned_version(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, agent_id: str
) -> LearnedHeadRow:
    """Atomically take the next version number for an agent and make it active: the head
    after (its `latest_version` is the new version)."""
    row = await conn.fetchrow(_ALLOCATE, uuid.uuid4(), tenant_id, agent_id)
    assert row is not None  # RETURNING the upserted row
    return LearnedHeadRow._make(row)


_ADD_LEARNED = f"""
INSERT INTO learned_versions ({", ".join(LEARNED_VERSION_ROW_COLUMNS)})
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING {", ".join(LEARNED_VERSION_ROW_COLUMNS)}
"""


async def add_learned_version(
    conn: asyncpg.Connection, row: LearnedVersionRow
) -> LearnedVersionRow:
    stored = await conn.fetchrow(
        _ADD_LEARNED,
        row.id,
        row.tenant_id,
        row.agent_id,
        row.version,
        pg.dumps(row.content),
        row.created_at,
    )
    assert stored is not None
    return LearnedVersionRow._make(stored)


_GET_HEAD = f"SELECT {_HEAD} FROM learned_heads WHERE tenant_id = $1 AND agent_id = $2"


async def get_learned_head(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, agent_id: str, *, for_update: bool = False
) -> LearnedHeadRow | None:
    sql = _GET_HEAD + (" FOR UPDATE" if for_update else "")
    row = await conn.fetchrow(sql, tenant_id, agent_id)
    return None if row is None else LearnedHeadRow._make(row)


_ACTIVATE = f"""
UPDATE learned_heads SET active_version = $3, updated_at = $4
WHERE tenant_id = $1 AND agent_id = $2
RETURNING {_HEAD}
"""


async def activate_learned_version(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, agent_id: str, version: int, now: datetime
) -> LearnedHeadRow | None:
    """Make `version` the agent's active one (a rollback); the head after."""
    row = await conn.fetchrow(_ACTIVATE, tenant_id, agent_id, version, now)
    return None if row is None else LearnedHeadRow._make(row)


_GET_LEARNED = f"""
SELECT {_LEARNED} FROM learned_versions v
WHERE v.tenant_id = $1 AND v.agent_id = $2 AND v.version = $3
"""


async def get_learned_version(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, agent_id: str, version: int
) -> LearnedVersionRow | None:
    row = await conn.fetchrow(_GET_LEARNED, tenant_id, agent_id, version)
    return None if row is None else LearnedVersionRow._make(row)


_VERSION_NUMBERS = "SELECT version FROM learned_versions WHERE tenant_id = $1 AND agent_id = $2"


async def learned_version_numbers(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, agent_id: str
) -> list[int]:
    return [int(r[0]) for r in await conn.fetch(_VERSION_NUMBERS, tenant_id, agent_id)]


_ACTIVE_LEARNED = f"""
SELECT {_LEARNED} FROM learned_versions v
JOIN learned_heads h ON h.tenant_id = v.tenant_id AND h.agent_id = v.agent_id
                     AND h.active_version = v.version
WHERE h.tenant_id = $1 AND h.agent_id = $2 AND v.tenant_id = $1
"""


async def get_active_learned(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, agent_id: str
) -> LearnedVersionRow | None:
    """The active version in one query (used on the context path)."""
    row = await conn.fetchrow(_ACTIVE_LEARNED, tenant_id, agent_id)
    return None if row is None else LearnedVersionRow._make(row)
