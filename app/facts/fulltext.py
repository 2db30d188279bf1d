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
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from app.facts.policy import FACT_KIND
from app.knowledge.asof import valid_at
from app.knowledge.repository import readable, scope_clause
from app.knowledge.scopes import Scope
from app.models.base import table_of
from app.models.memory_item import MemoryItem
from app.search import bm25

M = table_of(MemoryItem).c


def _facts_of(tenant_id: uuid.UUID, scope: Scope) -> tuple[sa.ColumnElement[bool], ...]:
    return (M.tenant_id == tenant_id, scope_clause(scope), M.kind == FACT_KIND)


# a query word in more than this share of the scope's facts is one of its stop words
# ("user" in a scope of facts about the user): it says nothing about which fact matches
STOP_SHARE = 0.5
STOP_MIN_FACTS = 6
# a word in at most this share of the scope's facts (or RARE_MIN of them) names something
RARE_SHARE = 0.02
RARE_MIN = 5
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
    rows = await db.execute(_LEXEMES, {"texts": list(texts)})
    lexemes = {int(r[0]) - 1: list(r[1] or []) for r in rows}
    every = sorted({x for ls in lexemes.values() for x in ls})
    if not every:
        return [[] for _ in texts]
    current = (*_facts_of(tenant_id, scope), M.invalid_at.is_(None))
    n_docs = int((await db.execute(sa.select(sa.func.count()).where(*current))).scalar_one())
    if not n_docs:
        return [[] for _ in texts]
    simple: sa.ColumnElement[Any] = sa.literal_column("'simple'::regconfig")
    lex = sa.func.unnest(sa.literal(every, ARRAY(sa.Text))).table_valued("l").render_derived()
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
    rare = {
        x
        for x, n in dfs.items()
        if 0 < n <= max(RARE_MIN, RARE_SHARE * n_docs) and not x.isdigit()  # "3" names nothing
    } - stop
    if not rare:
        return [[] for _ in texts]
    wanted = [x for x in every if dfs.get(x) and x not in stop]
    query = sa.func.to_tsquery(
        simple, " | ".join("'" + x.replace("'", "''") + "'" for x in sorted(rare))
    )
    hits = sa.cast(
        sa.func.ts_filter(
            sa.func.setweight(
                _VECTOR, sa.literal_column("'A'"), sa.literal(wanted, ARRAY(sa.Text))
            ),
            sa.literal_column("'{a}'::\"char\"[]"),
        ),
        sa.Text,
    )
    shown = (M.id, M.text, M.valid_from, M.fact_key, M.stated_at, M.importance, M.created_at)
    found = list(
        (
            await db.execute(
                sa.select(*shown, _LENGTH.label("dl"), hits.label("hits")).where(
                    *current, _VECTOR.op("@@")(query)
                )
            )
        ).all()
    )
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
