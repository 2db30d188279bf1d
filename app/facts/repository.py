"""SQL of the facts store (every statement on facts in one place): nearest facts
by full text, the scope's keys and the pairs of keys its decisions joined (attributes),
what a decision is shown (current facts of keys, text neighbours ranked by BM25 over the
facts of the scope), an attribute's whole history, the writes of a fact and its history,
the facts a session delete touches. Every statement names `tenant_id`; callers commit.

Every function runs SQL text on an asyncpg connection (composed with `app.core.pg.Params`
and the visibility rules of `app.knowledge.repository`, `readable_sql` and `scope_sql`);
rows come back as `MemoryItemRow` (select list from the table model). Validity at a time:
`app.knowledge.repository.valid_at_sql`; version rows: `app.knowledge.versions`; a
session's extraction state: `app.facts.state`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from app.core import pg

# the store's text searches live in their own module (size), read through this one
from app.facts.fulltext import ITEM, facts_of_sql
from app.facts.fulltext import nearest_facts as nearest_facts
from app.facts.fulltext import text_neighbours as text_neighbours
from app.facts.policy import FACT_KIND
from app.knowledge.repository import readable_sql, scope_sql, valid_at_sql
from app.knowledge.scopes import Scope
from app.knowledge.timeline import merge_sources
from app.models.memory_item import MEMORY_ITEM_ROW_COLUMNS, MemoryItemRow


def _items(rows: Sequence[asyncpg.Record]) -> list[MemoryItemRow]:
    return [MemoryItemRow._make(r) for r in rows]


_LOCK_TARGETS = f"""
SELECT {ITEM} FROM memory_items m WHERE m.tenant_id = $1 AND m.id = ANY($2::uuid[])
FOR UPDATE
"""


async def lock_targets(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, MemoryItemRow]:
    """The targeted facts, row-locked for this transaction."""
    if not ids:
        return {}
    return {r.id: r for r in _items(await conn.fetch(_LOCK_TARGETS, tenant_id, list(ids)))}


async def superseded(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, item_id: uuid.UUID, *, agent_id: str | None
) -> list[MemoryItemRow]:
    """The items this item replaced (their `superseded_by` names it)."""
    p = pg.Params()
    where = readable_sql(p, tenant_id, agent_id)
    sql = (
        f"SELECT {ITEM} FROM memory_items m WHERE {where} "
        f"AND m.superseded_by = {p.add(item_id, 'item_id')} ORDER BY m.invalid_at, m.id"
    )
    return _items(await conn.fetch(*p.sql(sql)))


def _scope_facts(
    p: pg.Params,
    tenant_id: uuid.UUID,
    scope: Scope,
    agent_id: str | None,
    as_of: datetime | None,
) -> str:
    """The scope's facts a caller may read: valid ones, or with `as_of` those true then."""
    parts = [
        readable_sql(p, tenant_id, agent_id, include_invalidated=as_of is not None),
        *([valid_at_sql(p, tenant_id, as_of)] if as_of is not None else []),
        scope_sql(p, scope),
        f"m.kind = {p.add(FACT_KIND, 'kind')}",
    ]
    return " AND ".join(parts)


async def top_facts(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    scope: Scope,
    *,
    limit: int,
    agent_id: str | None,
    as_of: datetime | None = None,
) -> list[MemoryItemRow]:
    """The scope's valid facts (with `as_of`: those true then), most important (then
    newest) first."""
    p = pg.Params()
    where = _scope_facts(p, tenant_id, scope, agent_id, as_of)
    sql = (
        f"SELECT {ITEM} FROM memory_items m WHERE {where} "
        f"ORDER BY m.importance DESC, m.created_at DESC, m.id LIMIT {p.add(limit, 'limit')}"
    )
    return _items(await conn.fetch(*p.sql(sql)))


async def key_counts(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    scope: Scope,
    *,
    agent_id: str | None,
    limit: int,
    as_of: datetime | None = None,
) -> list[tuple[str, int]]:
    """The scope's keys in use: (key, valid facts holding it; with `as_of`, facts true
    then), most used first."""
    p = pg.Params()
    where = _scope_facts(p, tenant_id, scope, agent_id, as_of)
    sql = (
        f"SELECT m.fact_key, count(*) AS n FROM memory_items m "
        f"WHERE {where} AND m.fact_key IS NOT NULL GROUP BY m.fact_key "
        f"ORDER BY n DESC, m.fact_key LIMIT {p.add(limit, 'limit')}"
    )
    return [(str(r[0]), int(r[1])) for r in await conn.fetch(*p.sql(sql))]


async def facts_of_keys(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    scope: Scope,
    keys: Sequence[str],
    *,
    agent_id: str | None,
    limit: int,
    as_of: datetime | None = None,
) -> list[MemoryItemRow]:
    """The scope's valid facts (with `as_of`: true then) holding one of `keys`, most
    important (then newest) first."""
    if not keys:
        return []
    p = pg.Params()
    where = _scope_facts(p, tenant_id, scope, agent_id, as_of)
    sql = (
        f"SELECT {ITEM} FROM memory_items m WHERE {where} "
        f"AND m.fact_key = ANY(CAST({p.add(list(keys), 'keys')} AS text[])) "
        f"ORDER BY m.importance DESC, m.created_at DESC, m.id LIMIT {p.add(limit, 'limit')}"
    )
    return _items(await conn.fetch(*p.sql(sql)))


_REPLACED_ANY = """
SELECT DISTINCT superseded_by FROM memory_items
WHERE tenant_id = $1 AND superseded_by = ANY($2::uuid[])
"""


async def replaced_any(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID]
) -> set[uuid.UUID]:
    """Those of `ids` that replaced another fact (some fact's `superseded_by` names them)."""
    if not ids:
        return set()
    return {r[0] for r in await conn.fetch(_REPLACED_ANY, tenant_id, list(ids))}


_REPLACED_BY = f"""
SELECT {ITEM} FROM memory_items m WHERE m.tenant_id = $1 AND m.superseded_by = ANY($2::uuid[])
FOR UPDATE
"""


async def chain_of(conn: asyncpg.Connection, tenant_id: uuid.UUID, item: Any) -> list[Any]:
    """`item` and every fact it replaced, directly or through others (their
    `superseded_by` chain), row-locked: the timeline an older statement is fitted into.
    `item` comes back as it was given, the others as `MemoryItemRow`s."""
    out: dict[uuid.UUID, Any] = {item.id: item}
    frontier = [item.id]
    while frontier:
        rows = _items(await conn.fetch(_REPLACED_BY, tenant_id, frontier))
        frontier = []
        for r in rows:
            if r.id not in out:
                out[r.id] = r
                frontier.append(r.id)
    return list(out.values())


# --- attributes and what a decision is shown ---------------------------------


@dataclass(frozen=True, slots=True)
class KeyStat:
    """A key of the scope: its current facts, all its facts, when it was first used."""

    key: str
    current: int
    total: int
    first: datetime


async def scope_keys(conn: asyncpg.Connection, tenant_id: uuid.UUID, scope: Scope) -> list[KeyStat]:
    """Every key of the scope's facts (valid or not), most current facts first."""
    p = pg.Params()
    sql = (
        "SELECT m.fact_key, count(*) FILTER (WHERE m.invalid_at IS NULL) AS cur, count(*), "
        f"min(m.created_at) FROM memory_items m WHERE {facts_of_sql(p, tenant_id, scope)} "
        "AND m.fact_key IS NOT NULL GROUP BY m.fact_key ORDER BY cur DESC, m.fact_key"
    )
    rows = await conn.fetch(*p.sql(sql))
    return [KeyStat(str(r[0]), int(r[1]), int(r[2]), r[3]) for r in rows]


async def joined_keys(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, scope: Scope
) -> list[tuple[str, str]]:
    """Pairs of keys the scope's history joined: a fact of one key superseded by a fact of
    another (an INVALIDATE naming it, or a late statement placed before it), and a fact
    whose key an UPDATE rewrote (an earlier version holds the other key). Whether a pair
    teaches an alias is `app.facts.policy.attributes`' to say."""
    p = pg.Params()
    keyed = f"{facts_of_sql(p, tenant_id, scope)} AND m.fact_key IS NOT NULL"
    facts = await conn.fetch(
        *p.sql(f"SELECT m.id, m.fact_key, m.superseded_by FROM memory_items m WHERE {keyed}")
    )
    key = {r[0]: str(r[1]) for r in facts}
    pairs = {(key[r[0]], key[r[2]]) for r in facts if r[2] in key and key[r[0]] != key[r[2]]}
    rows = await conn.fetch(
        *p.sql(
            "SELECT v.item_id, v.fact_key FROM memory_item_versions v "
            "WHERE v.tenant_id = :tenant_id "
            f"AND v.item_id IN (SELECT m.id FROM memory_items m WHERE {keyed}) "
            "AND v.fact_key IS NOT NULL GROUP BY v.item_id, v.fact_key"
        )
    )
    pairs |= {(str(r[1]), key[r[0]]) for r in rows if r[0] in key and str(r[1]) != key[r[0]]}
    return sorted(pairs)


async def current_of_keys(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    scope: Scope,
    keys: Sequence[str],
    *,
    limit: int,
) -> list[MemoryItemRow]:
    """The scope's current facts holding one of `keys` (newest first, at most `limit`)."""
    if not keys:
        return []
    p = pg.Params()
    sql = (
        f"SELECT {ITEM} FROM memory_items m WHERE {facts_of_sql(p, tenant_id, scope)} "
        f"AND m.invalid_at IS NULL AND m.fact_key = ANY(CAST({p.add(list(keys), 'keys')} "
        f"AS text[])) ORDER BY m.valid_from DESC, m.id LIMIT {p.add(limit, 'limit')}"
    )
    return _items(await conn.fetch(*p.sql(sql)))


async def attribute_facts(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, scope: Scope, keys: Sequence[str]
) -> list[MemoryItemRow]:
    """Every fact of an attribute (its keys), valid or not, row-locked: the history a
    late statement is placed in and the one-value rule works on."""
    if not keys:
        return []
    p = pg.Params()
    sql = (
        f"SELECT {ITEM} FROM memory_items m WHERE {facts_of_sql(p, tenant_id, scope)} "
        f"AND m.fact_key = ANY(CAST({p.add(sorted(set(keys)), 'keys')} AS text[])) "
        "ORDER BY m.valid_from, m.id FOR UPDATE"
    )
    return _items(await conn.fetch(*p.sql(sql)))


# --- a fact's writes (app.facts.apply, app.facts.support, app.facts.edit) ---------------

# what a write of a fact stores: every column but its identity, scope, kind, source,
# payload (no path changes a fact's) and creation
_FIXED = ("id", "tenant_id", "scope_kind", "scope_id", "kind", "source", "payload", "created_at")
_CHANGING = tuple(c for c in MEMORY_ITEM_ROW_COLUMNS if c not in _FIXED)
_JSON = frozenset({"payload", "sources"})
_INSERT = (
    f"INSERT INTO memory_items ({', '.join(MEMORY_ITEM_ROW_COLUMNS)}) VALUES "
    f"({', '.join(f'${i + 1}' for i in range(len(MEMORY_ITEM_ROW_COLUMNS)))})"
)
_UPDATE = (
    "UPDATE memory_items SET "
    + ", ".join(f"{c} = ${i + 3}" for i, c in enumerate(_CHANGING))
    + " WHERE tenant_id = $1 AND id = $2"
)


def _value(column: str, value: Any) -> Any:
    if column in _JSON:
        return None if value is None and column == "payload" else pg.dumps(value)
    if column in ("tags", "source_seqs"):
        return list(value or [])
    return value


async def insert_item(conn: asyncpg.Connection, item: Any) -> None:
    """Store a new fact (any object with every column as an attribute)."""
    await conn.execute(_INSERT, *(_value(c, getattr(item, c)) for c in MemoryItemRow._fields))


async def update_item(conn: asyncpg.Connection, item: Any) -> None:
    """Store a fact as it now is (its row is locked by this transaction)."""
    await conn.execute(
        _UPDATE, item.tenant_id, item.id, *(_value(c, getattr(item, c)) for c in _CHANGING)
    )


# --- a session delete (app.facts.support) -----------------------------------------------

_OF_SESSION = f"""
SELECT {ITEM} FROM memory_items m
WHERE m.tenant_id = $1 AND m.kind = $2
  AND (m.source_session_id = $3 OR m.sources @> $4)
ORDER BY m.id FOR UPDATE
"""


async def facts_of_session(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> list[MemoryItemRow]:
    """The facts a session supports (its `sources` name it, or it is their source),
    row-locked."""
    names = pg.dumps([{"session_id": str(session_id)}])
    return _items(await conn.fetch(_OF_SESSION, tenant_id, FACT_KIND, session_id, names))


_REPLACED_BY_ANY = f"""
SELECT {ITEM} FROM memory_items m
WHERE m.tenant_id = $1 AND m.superseded_by = ANY($2::uuid[]) AND NOT (m.id = ANY($2::uuid[]))
ORDER BY m.id FOR UPDATE
"""


async def replaced_by_any(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID]
) -> list[MemoryItemRow]:
    """The facts (other than `ids`) whose `superseded_by` names one of `ids`, row-locked."""
    if not ids:
        return []
    return _items(await conn.fetch(_REPLACED_BY_ANY, tenant_id, list(ids)))


_VERSION_SOURCES = """
SELECT version, sources, source_session_id FROM memory_item_versions
WHERE tenant_id = $1 AND item_id = $2
"""
_SET_VERSION_SOURCES = """
UPDATE memory_item_versions SET sources = $4
WHERE tenant_id = $1 AND item_id = $2 AND version = $3
"""
_SET_VERSION_SOURCES_UNSOURCED = """
UPDATE memory_item_versions SET sources = $4, source_session_id = NULL, source_seqs = '{}'
WHERE tenant_id = $1 AND item_id = $2 AND version = $3
"""


async def forget_in_versions(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, item_id: uuid.UUID, session_id: uuid.UUID
) -> None:
    """A kept fact's earlier versions stop naming the deleted session as a source (the
    erasure deletes versions whose source is the session)."""
    for version, sources, source in await conn.fetch(_VERSION_SOURCES, tenant_id, item_id):
        rest = [
            dict(s)
            for s in merge_sources(sources or [])
            if str(s.get("session_id")) != str(session_id)
        ]
        if source != session_id and rest == list(sources or []):
            continue
        sql = _SET_VERSION_SOURCES_UNSOURCED if source == session_id else _SET_VERSION_SOURCES
        await conn.execute(sql, tenant_id, item_id, version, pg.dumps(rest))


_REDATE_FROM = """
UPDATE memory_item_versions SET valid_from = $3
WHERE tenant_id = $1 AND item_id = $2 AND valid_from < $3
"""
_REDATE_STATED = """
UPDATE memory_item_versions SET stated_at = $3
WHERE tenant_id = $1 AND item_id = $2 AND stated_at < $3
"""


async def redate_versions(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, item_id: uuid.UUID, start: datetime
) -> None:
    """A kept fact re-dated to `start` (its earliest remaining source): its earlier
    versions no longer begin, nor were said, before it (their times came from the deleted
    statements; `as_of` reads a fact's start from its first version)."""
    await conn.execute(_REDATE_FROM, tenant_id, item_id, start)
    await conn.execute(_REDATE_STATED, tenant_id, item_id, start)


_FIRST_SAID = """
SELECT min(m.created_at) FROM messages m
JOIN unnest($2::uuid[], $3::bigint[]) AS s(session_id, seq)
  ON m.session_id = s.session_id AND m.seq = s.seq
WHERE m.tenant_id = $1
"""


async def first_said(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, sources: Sequence[Any]
) -> datetime | None:
    """When the earliest of `sources` ([{session_id, seqs}]) was written (None: none of
    its messages is left)."""
    pairs = [
        (uuid.UUID(str(s["session_id"])), int(q))
        for s in sources
        if s.get("session_id")
        for q in s.get("seqs") or []
    ]
    if not pairs:
        return None
    found: datetime | None = await conn.fetchval(
        _FIRST_SAID, tenant_id, [p[0] for p in pairs], [p[1] for p in pairs]
    )
    return found
