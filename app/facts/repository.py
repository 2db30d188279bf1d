"""SQL of the facts store (issue 45: every statement on facts in one place): nearest facts
by full text, the scope's keys and the pairs of keys its decisions joined (attributes),
what a decision is shown (current facts of keys, text neighbours ranked by BM25 over the
facts of the scope), an attribute's whole history, the facts a session delete touches.
Every statement names `tenant_id`; callers commit. Validity at a time:
`app.knowledge.asof`; version rows: `app.knowledge.versions`; a session's extraction
state: `app.facts.state`."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from app.facts.policy import FACT_KIND
from app.knowledge.asof import valid_at
from app.knowledge.repository import readable, scope_clause
from app.knowledge.scopes import Scope
from app.models.base import table_of
from app.models.fact import MemoryItemVersion
from app.models.memory_item import MemoryItem
from app.search import bm25

M = table_of(MemoryItem).c
# a query word in more than this share of the scope's facts is one of its stop words
# ("user" in a scope of facts about the user): it says nothing about which fact matches
STOP_SHARE = 0.5
STOP_MIN_FACTS = 6
# the expression of ix_memory_items_text_fts (the planner matches it literally)
_VECTOR = sa.func.to_tsvector(
    sa.literal_column("'english'::regconfig"),
    sa.func.coalesce(M.text, sa.literal_column("''::text")),
)


def _or_query(text: str) -> sa.ColumnElement[Any]:
    """Any of the text's lexemes (plainto_tsquery ANDs them; a fact matching some words of
    a message is still a neighbour)."""
    plain = sa.cast(
        sa.func.plainto_tsquery(sa.literal_column("'english'::regconfig"), text), sa.Text
    )
    return sa.cast(sa.func.replace(plain, " & ", " | "), sa.dialects.postgresql.TSQUERY)


# |d| of a fact: its lexeme positions (the function of migration 0006, as for messages)
_LENGTH = sa.func.coalesce(sa.func.loom_tsvector_length(_VECTOR), 0)
# `'lexeme':1,4 'other':2` (a tsvector as text): lexeme and its positions
_ENTRY = re.compile(r"'((?:[^']|'')*)':([0-9A-D,]+)")


def _tfs(hits: str | None) -> dict[str, int]:
    """lexeme -> tf of a fact's vector filtered to the query's lexemes (`_HITS`)."""
    return {
        m.group(1).replace("''", "'"): m.group(2).count(",") + 1
        for m in _ENTRY.finditer(hits or "")
    }


async def nearest_facts(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    scope: Scope,
    text: str,
    *,
    limit: int,
    agent_id: str | None,
    include_invalidated: bool = False,
    as_of: datetime | None = None,
    drop_stop_words: bool = False,
) -> list[Any]:
    """The facts of `scope` best matching `text`, ranked as messages are (BM25 of
    `app.search.bm25`: N, avgdl and n(t) over the scope's facts; a fact is one document,
    with no conversation around it), then importance, newest; valid ones only unless
    `include_invalidated` (with `as_of`: those true then). The text index finds the facts
    holding any of the words. `drop_stop_words` (extraction's neighbour search): the
    scope's own stop words (a word in most of its facts, as "user" is) are left out of the
    query once the scope has a few facts, and facts matching nothing else are not
    neighbours."""
    q = _or_query(text)
    lexemes = sa.func.tsvector_to_array(
        sa.func.to_tsvector(sa.literal_column("'english'::regconfig"), text)
    )
    hits = sa.cast(
        sa.func.ts_filter(
            sa.func.setweight(_VECTOR, sa.literal_column("'A'"), lexemes),
            sa.literal_column("'{a}'::\"char\"[]"),
        ),
        sa.Text,
    )
    in_scope = (
        *readable(
            tenant_id, agent_id, include_invalidated=include_invalidated or as_of is not None
        ),
        scope_clause(scope),
        M.kind == FACT_KIND,
    )
    if as_of is not None and not include_invalidated:
        in_scope = (*in_scope, valid_at(tenant_id, as_of))
    stats = (
        await db.execute(
            sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(_LENGTH), 0)).where(
                *in_scope, _LENGTH > 0
            )
        )
    ).one()
    n_docs, total = int(stats[0]), int(stats[1])
    if not n_docs:
        return []
    rows = list(
        (
            await db.execute(
                sa.select(*M, _LENGTH.label("dl"), hits.label("hits")).where(
                    *in_scope, _VECTOR.op("@@")(q)
                )
            )
        ).all()
    )
    avgdl = total / n_docs
    tfs = [_tfs(r.hits) for r in rows]
    params = bm25.BM25Params()
    dfs = {t: sum(1 for tf in tfs if t in tf) for t in {t for tf in tfs for t in tf}}
    stop = (
        {t for t, n in dfs.items() if n > STOP_SHARE * n_docs}
        if drop_stop_words and n_docs >= STOP_MIN_FACTS
        else set()
    )
    idfs = {t: bm25.idf(n_docs, n) for t, n in dfs.items() if t not in stop}
    scored = [
        (
            sum(
                bm25.term_score(n, r.dl, avgdl, idfs[t], params) for t, n in tf.items() if t in idfs
            ),
            r,
        )
        for r, tf in zip(rows, tfs, strict=True)
    ]
    if stop:
        scored = [(score, r) for score, r in scored if score > 0]
    scored.sort(key=lambda p: (-p[0], -p[1].importance, -p[1].created_at.timestamp(), str(p[1].id)))
    return [_Ranked(r, score) for score, r in scored[:limit]]


class _Ranked:
    """A fact row with its BM25 score as `rank` (attribute access like the row)."""

    __slots__ = ("_row", "rank")

    def __init__(self, row: Any, rank: float) -> None:
        self._row, self.rank = row, rank

    def __getattr__(self, name: str) -> Any:
        return getattr(self._row, name)


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


async def current_of_key(
    db: AsyncSession, tenant_id: uuid.UUID, scope: Scope, key: str
) -> list[MemoryItem]:
    """The scope's valid facts of one key, row-locked (the one-value safety net)."""
    rows = await db.execute(
        sa.select(MemoryItem)
        .where(
            M.tenant_id == tenant_id,
            scope_clause(scope),
            M.kind == FACT_KIND,
            M.fact_key == key,
            M.invalid_at.is_(None),
        )
        .order_by(M.id)
        .with_for_update()
    )
    return list(rows.scalars())


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


# --- attributes and what a decision is shown (issue 45) ---------------------------------


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
    a, b = table_of(MemoryItem).alias("a"), table_of(MemoryItem).alias("b")
    replaced = (
        sa.select(a.c.fact_key, b.c.fact_key)
        .select_from(a.join(b, (b.c.tenant_id == a.c.tenant_id) & (b.c.id == a.c.superseded_by)))
        .where(
            a.c.tenant_id == tenant_id,
            a.c.kind == FACT_KIND,
            a.c.scope_kind == scope.kind,
            a.c.scope_id == scope.storage_id,
            a.c.fact_key.is_not(None),
            b.c.fact_key.is_not(None),
            a.c.fact_key != b.c.fact_key,
        )
    )
    v = table_of(MemoryItemVersion)
    rewritten = (
        sa.select(v.c.fact_key, M.fact_key)
        .select_from(
            table_of(MemoryItem).join(v, (v.c.tenant_id == M.tenant_id) & (v.c.item_id == M.id))
        )
        .where(
            *_facts_of(tenant_id, scope),
            v.c.tenant_id == tenant_id,
            v.c.fact_key.is_not(None),
            M.fact_key.is_not(None),
            v.c.fact_key != M.fact_key,
        )
    )
    rows = await db.execute(sa.union(replaced, rewritten))
    return sorted({(str(r[0]), str(r[1])) for r in rows})


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
    late statement is placed in and the one-value rule works on (issue 45)."""
    if not keys:
        return []
    rows = await db.execute(
        sa.select(MemoryItem)
        .where(*_facts_of(tenant_id, scope), M.fact_key.in_(sorted(set(keys))))
        .order_by(M.valid_from, M.id)
        .with_for_update()
    )
    return list(rows.scalars())


_LEXEMES = sa.text(
    "SELECT x.n, tsvector_to_array(to_tsvector('english'::regconfig, x.t)) "
    "FROM unnest(CAST(:texts AS text[])) WITH ORDINALITY AS x(t, n)"
)


async def text_neighbours(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    scope: Scope,
    texts: Sequence[str],
    *,
    limit: int,
) -> list[list[Any]]:
    """For each text, the scope's current facts matching it best (BM25, as
    `nearest_facts`, without the scope's stop words), at most `limit` each: three
    statements per batch whatever the number of texts, and the text index does the
    finding (issue 45: the per-candidate search read every fact sharing "user", 5-6 s
    per batch at 1,700 facts). Each text's lexemes; how many current facts hold each
    (the index, one lookup per lexeme) and how many current facts there are; then the
    facts holding a lexeme that is not a stop word. avgdl is that of the facts found."""
    if not texts:
        return []
    rows = await db.execute(_LEXEMES, {"texts": list(texts)})
    lexemes = {int(r[0]) - 1: list(r[1] or []) for r in rows}
    every = sorted({x for ls in lexemes.values() for x in ls})
    if not every:
        return [[] for _ in texts]
    current = (*_facts_of(tenant_id, scope), M.invalid_at.is_(None))
    n_docs = int((await db.execute(sa.select(sa.func.count()).where(*current))).scalar_one())
    if not n_docs:
        return [[] for _ in texts]
    lex = sa.func.unnest(sa.literal(every, ARRAY(sa.Text))).table_valued("l").render_derived()
    simple: sa.ColumnElement[Any] = sa.literal_column("'simple'::regconfig")
    df_of = (
        sa.select(sa.func.count())
        .where(*current, _VECTOR.op("@@")(sa.func.plainto_tsquery(simple, lex.c.l)))
        .scalar_subquery()
    )
    dfs = {str(r[0]): int(r[1]) for r in await db.execute(sa.select(lex.c.l, df_of))}
    stop = (
        {x for x, n in dfs.items() if n > STOP_SHARE * n_docs}
        if n_docs >= STOP_MIN_FACTS
        else set()
    )
    wanted = [x for x in every if dfs.get(x) and x not in stop]
    if not wanted:
        return [[] for _ in texts]
    query = sa.func.to_tsquery(simple, " | ".join("'" + x.replace("'", "''") + "'" for x in wanted))
    hits = sa.cast(
        sa.func.ts_filter(
            sa.func.setweight(
                _VECTOR, sa.literal_column("'A'"), sa.literal(wanted, ARRAY(sa.Text))
            ),
            sa.literal_column("'{a}'::\"char\"[]"),
        ),
        sa.Text,
    )
    found = list(
        (
            await db.execute(
                sa.select(*M, _LENGTH.label("dl"), hits.label("hits")).where(
                    *current, _VECTOR.op("@@")(query)
                )
            )
        ).all()
    )
    if not found:
        return [[] for _ in texts]
    avgdl = max(1.0, sum(int(r.dl) for r in found) / len(found))
    params = bm25.BM25Params()
    idfs = {x: bm25.idf(n_docs, dfs[x]) for x in wanted}
    tfs = [_tfs(r.hits) for r in found]
    out: list[list[Any]] = []
    for i in range(len(texts)):
        mine = set(lexemes.get(i, [])) & set(idfs)
        scored = [
            (
                sum(
                    bm25.term_score(n, r.dl, avgdl, idfs[x], params)
                    for x, n in tf.items()
                    if x in mine
                ),
                r,
            )
            for r, tf in zip(found, tfs, strict=True)
        ]
        scored = [(s, r) for s, r in scored if s > 0]
        scored.sort(
            key=lambda p: (-p[0], -p[1].importance, -p[1].created_at.timestamp(), str(p[1].id))
        )
        out.append([_Ranked(r, s) for s, r in scored[:limit]])
    return out
