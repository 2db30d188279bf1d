"""SQL of durable facts: nearest facts by full text, the scope's facts, extraction state,
the messages of a batch. Every statement names `tenant_id`; callers commit. Validity at a
time: `app.knowledge.asof`; version rows: `app.knowledge.versions`."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.partitions import FAN_OUT
from app.facts.policy import FACT_KIND
from app.knowledge.asof import valid_at
from app.knowledge.repository import readable, scope_clause
from app.knowledge.scopes import Scope
from app.models.base import table_of
from app.models.fact import FactExtraction
from app.models.memory_item import MemoryItem
from app.search import bm25

M = table_of(MemoryItem).c
X = table_of(FactExtraction)
# a query word in more than this share of the scope's facts is one of its stop words
# ("user" in a scope of facts about the user): it says nothing about which fact matches
STOP_SHARE = 0.5
STOP_MIN_FACTS = 6

MAX_ERROR_CHARS = 500
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


# --- extraction state ------------------------------------------------------------------


def _clip(error: str | None) -> str | None:
    return None if error is None else error[:MAX_ERROR_CHARS]


async def get_state(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, *, for_update: bool = False
) -> FactExtraction | None:
    q = sa.select(FactExtraction).where(X.c.tenant_id == tenant_id, X.c.session_id == session_id)
    if for_update:
        q = q.with_for_update()
    return (await db.execute(q)).scalar_one_or_none()


async def ensure_state(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID) -> None:
    await db.execute(
        insert(X)
        .values(tenant_id=tenant_id, session_id=session_id)
        .on_conflict_do_nothing(index_elements=[X.c.tenant_id, X.c.session_id])
    )


async def mark(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, **values: Any
) -> None:
    """Upsert the job fields of the session's extraction row."""
    if "last_error" in values:
        values["last_error"] = _clip(values["last_error"])
    values["updated_at"] = sa.func.now()
    # counters given as expressions of the row (runs + 1) apply to an existing row only
    first = {
        k: (1 if k == "runs" else v)
        for k, v in values.items()
        if k == "runs"
        or not isinstance(v, sa.ColumnElement)
        or isinstance(v, sa.sql.functions.FunctionElement)
    }
    stmt = insert(X).values(tenant_id=tenant_id, session_id=session_id, **first)
    # a function's value (now()) is the inserted row's: Citus calls no function but
    # immutable ones in an upsert's DO UPDATE
    update = {
        k: (stmt.excluded[k] if isinstance(v, sa.sql.functions.FunctionElement) else v)
        for k, v in values.items()
    }
    stmt = stmt.on_conflict_do_update(index_elements=[X.c.tenant_id, X.c.session_id], set_=update)
    await db.execute(stmt)


async def mark_pending(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, job_id: str
) -> None:
    """Queued; a running job keeps `running` (the queue deduplicates per session)."""
    now = sa.func.now()
    stmt = insert(X).values(
        tenant_id=tenant_id,
        session_id=session_id,
        status="pending",
        job_id=job_id,
        enqueued_at=now,
        updated_at=now,
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=[X.c.tenant_id, X.c.session_id],
        set_={
            "status": "pending",
            "job_id": job_id,
            "enqueued_at": stmt.excluded.enqueued_at,
            "updated_at": stmt.excluded.updated_at,
        },
        where=(X.c.status != "running") & (X.c.tenant_id == tenant_id),
    )
    await db.execute(stmt)


async def add_usage(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    calls: int,
    input_tokens: int,
    output_tokens: int,
) -> None:
    stmt = insert(X).values(
        tenant_id=tenant_id,
        session_id=session_id,
        llm_calls=calls,
        llm_input_tokens=input_tokens,
        llm_output_tokens=output_tokens,
    )
    await db.execute(
        stmt.on_conflict_do_update(
            index_elements=[X.c.tenant_id, X.c.session_id],
            set_={
                "llm_calls": X.c.llm_calls + calls,
                "llm_input_tokens": X.c.llm_input_tokens + input_tokens,
                "llm_output_tokens": X.c.llm_output_tokens + output_tokens,
            },
        )
    )


async def advance(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, watermark: int
) -> None:
    await db.execute(
        sa.update(X)
        .where(X.c.tenant_id == tenant_id, X.c.session_id == session_id)
        .values(watermark_seq=watermark, updated_at=sa.func.now())
    )


async def set_failed_ranges(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, ranges: list[dict[str, Any]]
) -> None:
    await db.execute(
        sa.update(X)
        .where(X.c.tenant_id == tenant_id, X.c.session_id == session_id)
        .values(failed_ranges=ranges, updated_at=sa.func.now())
    )


async def watermark(db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID) -> int:
    return (await waiting_state(db, tenant_id, session_id))[0]


def retry_waiting(
    status: str | None,
    last_error: str | None,
    started_at: datetime | None = None,
    enqueued_at: datetime | None = None,
) -> bool:
    """The job is running, or a try failed and it is queued for its retry (`pending` with
    the try's error, started after it was last scheduled: a job scheduled again after
    its final failure is not a retry): an append must not move it later (its end
    follows up on what arrived meanwhile)."""
    if status == "running":
        return True
    if status != "pending" or last_error is None:
        return False
    return started_at is None or enqueued_at is None or started_at >= enqueued_at


_WAITING = sa.text("""
SELECT coalesce(x.watermark_seq, 0) AS watermark, x.status, x.last_error, x.started_at,
       x.enqueued_at,
       (SELECT count(*) FROM messages m
        WHERE m.tenant_id = :tid AND m.session_id = :sid AND m.role = 'user'
          AND m.seq > coalesce(x.watermark_seq, 0)) AS users
FROM (SELECT 1) one
LEFT JOIN fact_extractions x ON x.tenant_id = :tid AND x.session_id = :sid
""")


async def waiting_state(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> tuple[int, bool, int]:
    """The watermark, whether the job is busy (`retry_waiting`), and the user messages
    after the watermark (what a quiet run needs: issue 37)."""
    row = (await db.execute(_WAITING, {"tid": tenant_id, "sid": session_id})).one()
    busy = retry_waiting(row.status, row.last_error, row.started_at, row.enqueued_at)
    return int(row.watermark), busy, int(row.users)


# --- the session and its messages --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionFacts:
    agent_id: str
    config: dict[str, Any]
    last_seq: int
    l1_start_seq: int | None
    watermark: int
    user_id: str | None = None


_SESSION = sa.text("""
SELECT s.agent_id, s.config, s.last_seq, m.l1_start_seq, s.user_id,
       coalesce(x.watermark_seq, 0) AS watermark
FROM sessions s
LEFT JOIN memory_states m ON m.tenant_id = s.tenant_id AND m.session_id = s.id
LEFT JOIN fact_extractions x ON x.tenant_id = s.tenant_id AND x.session_id = s.id
WHERE s.tenant_id = :tid AND s.id = :sid AND s.erasure_id IS NULL
""")


async def session_facts(
    db: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID
) -> SessionFacts | None:
    row = (await db.execute(_SESSION, {"tid": tenant_id, "sid": session_id})).first()
    if row is None:
        return None
    return SessionFacts(
        row.agent_id,
        dict(row.config or {}),
        int(row.last_seq),
        None if row.l1_start_seq is None else int(row.l1_start_seq),
        int(row.watermark),
        row.user_id,
    )


@dataclass(frozen=True, slots=True)
class BatchRow:
    seq: int
    role: str
    name: str | None
    text: str
    token_count: int
    created_at: datetime


_MESSAGES = sa.text("""
SELECT seq, role, name, text, token_count, created_at FROM messages
WHERE tenant_id = :tid AND session_id = :sid AND seq > :after AND seq <= :upto
ORDER BY seq LIMIT :limit
""")


async def messages_after(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    *,
    after: int,
    upto: int,
    limit: int,
) -> list[BatchRow]:
    rows = await db.execute(
        _MESSAGES,
        {"tid": tenant_id, "sid": session_id, "after": after, "upto": upto, "limit": limit},
    )
    return [
        BatchRow(int(r.seq), r.role, r.name, r.text or "", int(r.token_count), r.created_at)
        for r in rows
    ]


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


async def stale_extractions(
    db: AsyncSession, *, pending_before: datetime, running_before: datetime, limit: int
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """(tenant_id, session_id) of extractions pending since before `pending_before` (their
    enqueue may have been lost while Redis was down) or running since before
    `running_before` (worker and job lost). Deliberately cross-tenant: only the worker's
    cron pass calls it."""
    rows = await db.execute(
        sa.select(X.c.tenant_id, X.c.session_id)
        .prefix_with(FAN_OUT)
        .where(
            ((X.c.status == "pending") & (X.c.updated_at < pending_before))
            | ((X.c.status == "running") & (X.c.updated_at < running_before))
        )
        .order_by(X.c.updated_at)
        .limit(limit)
    )
    return [(r[0], r[1]) for r in rows]
