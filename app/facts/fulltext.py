"""Full-text search over the facts store, for `app.facts.repository` (which re-exports it:
the store's statements are read through one module): `nearest_facts` (BM25 of
`app.search.bm25` over a scope's facts; the API's and the context's search) and
`text_neighbours` (the decision step's, a few statements per batch whatever the
store's size). Every statement names `tenant_id`."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import asyncpg

from app.core import pg
from app.facts.policy import FACT_KIND
from app.knowledge.repository import readable_sql, scope_sql, valid_at_sql
from app.knowledge.scopes import Scope
from app.models.memory_item import MEMORY_ITEM_ROW_COLUMNS, MemoryItemRow
from app.search import bm25

# a `MemoryItemRow`'s select list on alias `m`
ITEM = ", ".join(f"m.{c}" for c in MEMORY_ITEM_ROW_COLUMNS)
_WIDTH = len(MEMORY_ITEM_ROW_COLUMNS)


def facts_of_sql(p: pg.Params, tenant_id: uuid.UUID, scope: Scope) -> str:
    """The facts of one scope (extraction reads its own scope: no visibility filter)."""
    tenant = p.add(tenant_id, "tenant_id")
    return (
        f"m.tenant_id = {tenant} AND {scope_sql(p, scope)} AND m.kind = {p.add(FACT_KIND, 'kind')}"
    )


# a query word in more than this share of the scope's facts is one of its stop words
# ("user" in a scope of facts about the user): it says nothing about which fact matches
STOP_SHARE = 0.5
STOP_MIN_FACTS = 6
# a word in at most this share of the scope's facts (or RARE_MIN of them) names something
RARE_SHARE = 0.02
RARE_MIN = 5
# the expression of ix_memory_items_text_fts (the planner matches it literally)
_VECTOR = "to_tsvector('english'::regconfig, coalesce(m.text, ''::text))"
# |d| of a fact: its lexeme positions (the function of migration 0006, as for messages)
_LENGTH = f"coalesce(loom_tsvector_length({_VECTOR}), 0)"


def _or_query(text: str) -> str:
    """Any of the text's lexemes (plainto_tsquery ANDs them; a fact matching some words of
    a message is still a neighbour): SQL of the tsquery, `text` a bind name."""
    plain = f"CAST(plainto_tsquery('english'::regconfig, {text}) AS text)"
    return f"CAST(replace({plain}, ' & ', ' | ') AS tsquery)"


def _hits(lexemes: str) -> str:
    """A fact's vector filtered to `lexemes` (SQL of a text[]), as text (`_tfs` reads it)."""
    return f"CAST(ts_filter(setweight({_VECTOR}, 'A', {lexemes}), '{{a}}'::\"char\"[]) AS text)"


# `'lexeme':1,4 'other':2` (a tsvector as text): lexeme and its positions
_ENTRY = re.compile(r"'((?:[^']|'')*)':([0-9A-D,]+)")


def _tfs(hits: str | None) -> dict[str, int]:
    """lexeme -> tf of a fact's vector filtered to the query's lexemes (`_HITS`)."""
    return {
        m.group(1).replace("''", "'"): m.group(2).count(",") + 1
        for m in _ENTRY.finditer(hits or "")
    }


async def nearest_facts(
    conn: asyncpg.Connection,
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
    p = pg.Params()
    said = p.add(text, "text")
    lexemes = f"tsvector_to_array(to_tsvector('english'::regconfig, {said}))"
    parts = [
        readable_sql(
            p, tenant_id, agent_id, include_invalidated=include_invalidated or as_of is not None
        ),
        scope_sql(p, scope),
        f"m.kind = {p.add(FACT_KIND, 'kind')}",
    ]
    if as_of is not None and not include_invalidated:
        parts.append(valid_at_sql(p, tenant_id, as_of))
    in_scope = " AND ".join(parts)
    stats = await conn.fetchrow(
        *p.sql(
            f"SELECT count(*), coalesce(sum({_LENGTH}), 0) FROM memory_items m "
            f"WHERE {in_scope} AND {_LENGTH} > 0"
        )
    )
    assert stats is not None  # an aggregate: one row
    n_docs, total = int(stats[0]), int(stats[1])
    if not n_docs:
        return []
    found = await conn.fetch(
        *p.sql(
            f"SELECT {ITEM}, {_LENGTH} AS dl, {_hits(lexemes)} AS hits FROM memory_items m "
            f"WHERE {in_scope} AND {_VECTOR} @@ {_or_query(said)}"
        )
    )
    rows = [_Scored(MemoryItemRow._make(r[:_WIDTH]), int(r[_WIDTH]), r[_WIDTH + 1]) for r in found]
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
    scored.sort(
        key=lambda s: (
            -s[0],
            -s[1].row.importance,
            -s[1].row.created_at.timestamp(),
            str(s[1].row.id),
        )
    )
    return [_Ranked(r.row, score) for score, r in scored[:limit]]


class _Scored(NamedTuple):
    """A fact of `nearest_facts` with its length and matching lexemes."""

    row: MemoryItemRow
    dl: int
    hits: str | None


class _Ranked:
    """A fact row with its BM25 score as `rank` (attribute access like the row)."""

    __slots__ = ("_row", "rank")

    def __init__(self, row: Any, rank: float) -> None:
        self._row, self.rank = row, rank

    def __getattr__(self, name: str) -> Any:
        return getattr(self._row, name)


_LEXEMES = (
    "SELECT x.n, tsvector_to_array(to_tsvector('english'::regconfig, x.t)) "
    "FROM unnest($1::text[]) WITH ORDINALITY AS x(t, n)"
)


class _Neighbour(NamedTuple):
    """What the decision step reads of a neighbouring fact, with its length and matching
    lexemes."""

    id: uuid.UUID
    text: str | None
    valid_from: datetime | None
    fact_key: str | None
    stated_at: datetime | None
    importance: float
    created_at: datetime
    dl: int
    hits: str | None


async def text_neighbours(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    scope: Scope,
    texts: Sequence[str],
    *,
    limit: int,
) -> list[list[Any]]:
    """For each text, the scope's current facts matching it best (BM25, as
    `nearest_facts`), at most `limit` each, in four statements per batch whatever the
    number of texts (a search per candidate, 5-6 s per batch at 1,700 facts):
    each text's lexemes; how many current facts there are and how many hold each lexeme
    (the text index, one lookup per lexeme); then the facts holding a word that names
    something (below), with their matching lexemes and lengths (avgdl is theirs). The
    scope's stop words (in more than half of its facts, such as "user") do not count,
    and a fact is a neighbour only when it shares a word that names something (in at
    most `RARE_SHARE` of the facts, or `RARE_MIN` of them): "lives" alone does not make
    a cousin's town a neighbour of the user's home."""
    if not texts:
        return []
    rows = await conn.fetch(_LEXEMES, list(texts))
    lexemes = {int(r[0]) - 1: list(r[1] or []) for r in rows}
    every = sorted({x for ls in lexemes.values() for x in ls})
    if not every:
        return [[] for _ in texts]
    p = pg.Params()
    current = f"{facts_of_sql(p, tenant_id, scope)} AND m.invalid_at IS NULL"
    n_docs = int(
        await conn.fetchval(*p.sql(f"SELECT count(*) FROM memory_items m WHERE {current}"))
    )
    if not n_docs:
        return [[] for _ in texts]
    df_of = (
        f"(SELECT count(*) FROM memory_items m WHERE {current} "
        f"AND {_VECTOR} @@ plainto_tsquery('simple'::regconfig, lex.l))"
    )
    dfs = {
        str(r[0]): int(r[1])
        for r in await conn.fetch(
            *p.sql(
                f"SELECT lex.l, {df_of} "
                f"FROM unnest(CAST({p.add(every, 'every')} AS text[])) AS lex(l)"
            )
        )
    }
    stop = (
        {x for x, n in dfs.items() if n > STOP_SHARE * n_docs}
        if n_docs >= STOP_MIN_FACTS
        else set()
    )
    rare = {
        x
        for x, n in dfs.items()
        if 0 < n <= max(RARE_MIN, RARE_SHARE * n_docs) and not x.isdigit()  # "3" names nothing
    } - stop
    if not rare:
        return [[] for _ in texts]
    wanted = [x for x in every if dfs.get(x) and x not in stop]
    query = p.add(" | ".join("'" + x.replace("'", "''") + "'" for x in sorted(rare)), "query")
    hits = _hits(f"CAST({p.add(wanted, 'wanted')} AS text[])")
    shown = "m.id, m.text, m.valid_from, m.fact_key, m.stated_at, m.importance, m.created_at"
    found = [
        _Neighbour._make(r)
        for r in await conn.fetch(
            *p.sql(
                f"SELECT {shown}, {_LENGTH} AS dl, {hits} AS hits FROM memory_items m "
                f"WHERE {current} AND {_VECTOR} @@ to_tsquery('simple'::regconfig, {query})"
            )
        )
    ]
    if not found:
        return [[] for _ in texts]
    tfs = [_tfs(r.hits) for r in found]
    avgdl = max(1.0, sum(int(r.dl) for r in found) / len(found))
    idfs = {x: bm25.idf(n_docs, dfs[x]) for x in wanted}
    params = bm25.BM25Params()
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
            if mine & rare & set(tf)
        ]
        scored.sort(
            key=lambda p: (-p[0], -p[1].importance, -p[1].created_at.timestamp(), str(p[1].id))
        )
        out.append([_Ranked(r, s) for s, r in scored[:limit]])
    return out
