"""SQL of the facts store (every statement on facts in one place): nearest facts
by full text, the scope's keys and the pairs of keys its decisions joined (attributes),
what a decision is shown (current facts of keys, text neighbours ranked by BM25 over the
facts of the scope), an attribute's whole history, the facts a session delete touches.
Every statement names `tenant_id`; callers commit. Validity at a time:
`app.knowledge.asof`; version rows: `app.knowledge.versions`; a session's extraction
state: `app.facts.state`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession

# the store's text searches live in their own module (size), read through this one
from app.facts.fulltext import nearest_facts as nearest_facts
from app.facts.fulltext import text_neighbours as text_neighbours
from app.facts.policy import FACT_KIND
from app.knowledge.asof import valid_at
from app.knowledge.repository import readable, scope_clause
from app.knowledge.scopes import Scope
from app.knowledge.timeline import merge_sources
from app.models.base import table_of
from app.models.fact import MemoryItemVersion
from app.models.memory_item import MemoryItem

M = table_of(MemoryItem).c


async def lock_targets(
    db: AsyncSession, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, MemoryItem]:
    """The targeted facts, row-locked for this transaction."""
    if not ids:
        return {}
    rows = await db.execute(
        sa.select(MemoryItem).where(M.tenant_id == tenant_id, M.id.in_(list(ids))).with_for_update()
    )
    return {r.id: r for r in rows.scalars()}


async def superseded(
    db: AsyncSession, tenant_id: uuid.UUID, item_id: uuid.UUID, *, agent_id: str | None
) -> list[Any]:
    """The items this item replaced (their `superseded_by` names it)."""
    rows = await db.execute(
        sa.select(*M)
        .where(*readable(tenant_id, agent_id), M.superseded_by == item_id)
        .order_by(M.invalid_at, M.id)
    )
    return list(rows.all())


async def top_facts(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    scope: Scope,
    *,
    limit: int,
    agent_id: str | None,
    as_of: datetime | None = None,
) -> list[Any]:
    """The scope's valid facts (with `as_of`: those true then), most important (then
    newest) first."""
    valid = [valid_at(tenant_id, as_of)] if as_of is not None else []
    stmt = (
        sa.select(*M)
        .where(
            *readable(tenant_id, agent_id, include_invalidated=as_of is not None),
            *valid,
            scope_clause(scope),
            M.kind == FACT_KIND,
        )
        .order_by(M.importance.desc(), M.created_at.desc(), M.id)
        .limit(limit)
    )
    return list((await db.execute(stmt)).all())


async def key_counts(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    scope: Scope,
    *,
    agent_id: str | None,
    limit: int,
    as_of: datetime | None = None,
) -> list[tuple[str, int]]:
    """The scope's keys in use: (key, valid facts holding it; with `as_of`, facts true
    then), most used first."""
    n = sa.func.count().label("n")
    valid = [valid_at(tenant_id, as_of)] if as_of is not None else []
    rows = await db.execute(
        sa.select(M.fact_key, n)
        .where(
            *readable(tenant_id, agent_id, include_invalidated=as_of is not None),
            *valid,
            scope_clause(scope),
            M.kind == FACT_KIND,
            M.fact_key.is_not(None),
        )
        .group_by(M.fact_key)
        .order_by(n.desc(), M.fact_key)
        .limit(limit)
    )
    return [(str(r[0]), int(r[1])) for r in rows]


async def facts_of_keys(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    scope: Scope,
    keys: Sequence[str],
    *,
    agent_id: str | None,
    limit: int,
    as_of: datetime | None = None,
) -> list[Any]:
    """The scope's valid facts (with `as_of`: true then) holding one of `keys`, most
    important (then newest) first."""
    if not keys:
        return []
    valid = [valid_at(tenant_id, as_of)] if as_of is not None else []
    stmt = (
        sa.select(*M)
        .where(
            *readable(tenant_id, agent_id, include_invalidated=as_of is not None),
            *valid,
            scope_clause(scope),
            M.kind == FACT_KIND,
            M.fact_key.in_(list(keys)),
        )
        .order_by(M.importance.desc(), M.created_at.desc(), M.id)
        .limit(limit)
    )
    return list((await db.execute(stmt)).all())


async def replaced_any(
    db: AsyncSession, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID]
) -> set[uuid.UUID]:
    """Those of `ids` that replaced another fact (some fact's `superseded_by` names them)."""
    if not ids:
        return set()
    rows = await db.execute(
        sa.select(M.superseded_by)
        .where(M.tenant_id == tenant_id, M.superseded_by.in_(list(ids)))
        .distinct()
    )
    return {r[0] for r in rows}


async def chain_of(db: AsyncSession, tenant_id: uuid.UUID, item: MemoryItem) -> list[MemoryItem]:
    """`item` and every fact it replaced, directly or through others (their
    `superseded_by` chain), row-locked: the timeline an older statement is fitted into."""
    out: dict[uuid.UUID, MemoryItem] = {item.id: item}
    frontier = [item.id]
    while frontier:
        rows = await db.execute(
            sa.select(MemoryItem)
            .where(M.tenant_id == tenant_id, M.superseded_by.in_(frontier))
            .with_for_update()
        )
        frontier = []
        for r in rows.scalars():
            if r.id not in out:
                out[r.id] = r
                frontier.append(r.id)
    return list(out.values())


# --- attributes and what a decision is shown ---------------------------------


def _facts_of(tenant_id: uuid.UUID, scope: Scope) -> tuple[sa.ColumnElement[bool], ...]:
    """The facts of one scope (extraction reads its own scope: no visibility filter)."""
    return (M.tenant_id == tenant_id, scope_clause(scope), M.kind == FACT_KIND)


@dataclass(frozen=True, slots=True)
class KeyStat:
    """A key of the scope: its current facts, all its facts, when it was first used."""

    key: str
    current: int
    total: int
    first: datetime


async def scope_keys(db: AsyncSession, tenant_id: uuid.UUID, scope: Scope) -> list[KeyStat]:
    """Every key of the scope's facts (valid or not), most current facts first."""
    cur = sa.func.count().filter(M.invalid_at.is_(None)).label("cur")
    rows = await db.execute(
        sa.select(M.fact_key, cur, sa.func.count(), sa.func.min(M.created_at))
        .where(*_facts_of(tenant_id, scope), M.fact_key.is_not(None))
        .group_by(M.fact_key)
        .order_by(cur.desc(), M.fact_key)
    )
    return [KeyStat(str(r[0]), int(r[1]), int(r[2]), r[3]) for r in rows]


async def joined_keys(
    db: AsyncSession, tenant_id: uuid.UUID, scope: Scope
) -> list[tuple[str, str]]:
    """Pairs of keys the scope's history joined: a fact of one key superseded by a fact of
    another (an INVALIDATE naming it, or a late statement placed before it), and a fact
    whose key an UPDATE rewrote (an earlier version holds the other key). Whether a pair
    teaches an alias is `app.facts.policy.attributes`' to say."""
    facts = (
        await db.execute(
            sa.select(M.id, M.fact_key, M.superseded_by).where(
                *_facts_of(tenant_id, scope), M.fact_key.is_not(None)
            )
        )
    ).all()
    key = {r.id: str(r.fact_key) for r in facts}
    pairs = {
        (key[r.id], key[r.superseded_by])
        for r in facts
        if r.superseded_by in key and key[r.id] != key[r.superseded_by]
    }
    V = table_of(MemoryItemVersion)
    in_scope = sa.select(M.id).where(*_facts_of(tenant_id, scope), M.fact_key.is_not(None))
    rows = await db.execute(
        sa.select(V.c.item_id, V.c.fact_key)
        .where(V.c.tenant_id == tenant_id, V.c.item_id.in_(in_scope), V.c.fact_key.is_not(None))
        .group_by(V.c.item_id, V.c.fact_key)
    )
    pairs |= {
        (str(r.fact_key), key[r.item_id])
        for r in rows
        if r.item_id in key and str(r.fact_key) != key[r.item_id]
    }
    return sorted(pairs)


async def current_of_keys(
    db: AsyncSession, tenant_id: uuid.UUID, scope: Scope, keys: Sequence[str], *, limit: int
) -> list[Any]:
    """The scope's current facts holding one of `keys` (newest first, at most `limit`)."""
    if not keys:
        return []
    rows = await db.execute(
        sa.select(*M)
        .where(*_facts_of(tenant_id, scope), M.invalid_at.is_(None), M.fact_key.in_(list(keys)))
        .order_by(M.valid_from.desc(), M.id)
        .limit(limit)
    )
    return list(rows.all())


async def attribute_facts(
    db: AsyncSession, tenant_id: uuid.UUID, scope: Scope, keys: Sequence[str]
) -> list[MemoryItem]:
    """Every fact of an attribute (its keys), valid or not, row-locked: the history a
    late statement is placed in and the one-value rule works on."""
    if not keys:
        return []
    rows = await db.execute(
        sa.select(MemoryItem)
        .where(*_facts_of(tenant_id, scope), M.fact_key.in_(sorted(set(keys))))
        .order_by(M.valid_from, M.id)
        .with_for_update()
    )
    return list(rows.scalars())


# --- a session delete (app.facts.support) -----------------------------------------------


async def facts_of_session(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> list[MemoryItem]:
    """The facts a session supports (its `sources` name it, or it is their source),
    row-locked."""
    names = sa.or_(
        M.source_session_id == session_id,
        M.sources.op("@>")(
            sa.cast([{"session_id": str(session_id)}], sa.dialects.postgresql.JSONB)
        ),
    )
    rows = await db.execute(
        sa.select(MemoryItem)
        .where(M.tenant_id == tenant_id, M.kind == FACT_KIND, names)
        .order_by(M.id)
        .with_for_update()
    )
    return list(rows.scalars())


async def replaced_by_any(
    db: AsyncSession, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID]
) -> list[MemoryItem]:
    """The facts (other than `ids`) whose `superseded_by` names one of `ids`, row-locked."""
    if not ids:
        return []
    rows = await db.execute(
        sa.select(MemoryItem)
        .where(M.tenant_id == tenant_id, M.superseded_by.in_(list(ids)), M.id.not_in(list(ids)))
        .order_by(M.id)
        .with_for_update()
    )
    return list(rows.scalars())


async def forget_in_versions(
    db: AsyncSession, tenant_id: uuid.UUID, item_id: uuid.UUID, session_id: uuid.UUID
) -> None:
    """A kept fact's earlier versions stop naming the deleted session as a source (the
    erasure deletes versions whose source is the session)."""
    V = table_of(MemoryItemVersion)
    rows = await db.execute(
        sa.select(V.c.version, V.c.sources, V.c.source_session_id).where(
            V.c.tenant_id == tenant_id, V.c.item_id == item_id
        )
    )
    for version, sources, source in rows.all():
        rest = [
            dict(s)
            for s in merge_sources(sources or [])
            if str(s.get("session_id")) != str(session_id)
        ]
        if source != session_id and rest == list(sources or []):
            continue
        values: dict[str, Any] = {"sources": rest}
        if source == session_id:
            values.update(source_session_id=None, source_seqs=[])
        await db.execute(
            sa.update(V)
            .where(V.c.tenant_id == tenant_id, V.c.item_id == item_id, V.c.version == version)
            .values(**values)
        )


async def redate_versions(
    db: AsyncSession, tenant_id: uuid.UUID, item_id: uuid.UUID, start: datetime
) -> None:
    """A kept fact re-dated to `start` (its earliest remaining source): its earlier
    versions no longer begin, nor were said, before it (their times came from the deleted
    statements; `as_of` reads a fact's start from its first version)."""
    V = table_of(MemoryItemVersion)
    where = (V.c.tenant_id == tenant_id, V.c.item_id == item_id)
    await db.execute(sa.update(V).where(*where, V.c.valid_from < start).values(valid_from=start))
    await db.execute(sa.update(V).where(*where, V.c.stated_at < start).values(stated_at=start))


_FIRST_SAID = sa.text("""
SELECT min(m.created_at) FROM messages m
JOIN unnest(CAST(:sessions AS uuid[]), CAST(:seqs AS bigint[])) AS s(session_id, seq)
  ON m.session_id = s.session_id AND m.seq = s.seq
WHERE m.tenant_id = :tid
""")


async def first_said(
    db: AsyncSession, tenant_id: uuid.UUID, sources: Sequence[Any]
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
    row = (
        await db.execute(
            _FIRST_SAID,
            {"tid": tenant_id, "sessions": [p[0] for p in pairs], "seqs": [p[1] for p in pairs]},
        )
    ).first()
    return row[0] if row is not None else None
