"""Swap search: BM25 top 50 in PostgreSQL, optional LLM rerank, top N.

Degrades, never fails, on the optional parts: no LLM, an LLM error, timeout or an
unusable answer give BM25 order with `reranked=False`; Redis down skips the rerank cache.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import asyncpg
from redis.exceptions import RedisError

from app.core import deadline
from app.llm import usage
from app.memory.service import promote_messages
from app.messages.prior import asks_when
from app.models.session import SessionRow
from app.search import repository
from app.search.bm25 import BM25Params, WindowParams
from app.search.dates import DateSpec, named_dates
from app.search.query import normalize_query, query_terms
from app.search.rerank import (
    MAX_CANDIDATES,
    RERANK_MAX_TOKENS,
    RERANK_SYSTEM,
    RerankCandidate,
    build_prompt,
    cache_key,
    order_by_scores,
    parse_scores,
)
from app.search.scope import SearchScope
from app.search.speakers import named_authors

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from app.llm.client import LLMClient

log = logging.getLogger("loom.search")

Key = tuple[uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class SearchOptions:
    """Per-deployment knobs (from Settings)."""

    k1: float = 1.2
    b: float = 0.75
    windows: WindowParams = field(default_factory=WindowParams)
    rerank_timeout_seconds: float = 10.0
    rerank_cache_ttl_seconds: int = 3600


@dataclass(slots=True)
class SearchHit:
    """A result row."""

    message: Any  # a result row with Message's attribute names (see repository)
    bm25_score: float
    rerank_score: float | None = None


@dataclass(slots=True)
class SearchOutcome:
    """What a search found, and how it was ordered."""

    hits: list[SearchHit] = field(default_factory=list)
    reranked: bool = False
    rerank_skipped: str | None = None  # asked but not done: "budget", "unavailable"
    lexemes: list[str] = field(default_factory=list)
    candidates: int = 0
    dates: list[DateSpec] = field(default_factory=list)


# After a Redis failure the cache is skipped for a few seconds, so an unreachable Redis
# (connect timeouts rather than refusals) costs one timeout, not one per search.
_CACHE_BACKOFF_SECONDS = 5.0


class RerankCache:
    """The rerank scores in Redis (entries live `rerank_cache_ttl_seconds`), and when this
    process may try Redis again after a failure: one per process, owned by its lifespan
    state (`app.state.Caches`)."""

    def __init__(self, redis: Redis | None) -> None:
        self.redis = redis
        self._down_until = 0.0  # monotonic deadline of the backoff

    def _usable(self, ttl: int) -> bool:
        return self.redis is not None and ttl > 0 and time.monotonic() >= self._down_until

    def _failed(self, exc: Exception, action: str) -> None:
        if isinstance(exc, (RedisError, OSError, asyncio.TimeoutError)):
            self._down_until = time.monotonic() + _CACHE_BACKOFF_SECONDS
        log.info("rerank cache %s skipped: %s", action, type(exc).__name__)

    async def scores(self, key: str, ttl: int) -> dict[str, float] | None:
        if self.redis is None or not self._usable(ttl):
            return None
        try:
            raw = await self.redis.get(key)
            if raw is None:
                return None
            data = json.loads(raw)
            return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else None
        except Exception as exc:  # Redis down or a garbled entry: the cache is optional.
            self._failed(exc, "read")
            return None

    async def store(self, key: str, scores: dict[str, float], ttl: int) -> None:
        if self.redis is None or not self._usable(ttl):
            return
        try:
            await self.redis.set(key, json.dumps(scores), ex=ttl)
        except Exception as exc:
            self._failed(exc, "write")

    def forget(self, tenant: uuid.UUID, sessions: Collection[uuid.UUID]) -> None:
        """Nothing of a session is held here: the Redis entries are scores under a hash of
        the query and the candidates' (session, seq), and expire on their own."""


def _key_str(key: Key) -> str:
    return f"{key[0]}:{key[1]}"


async def _rerank(
    llm: LLMClient,
    cache: RerankCache | None,
    query: str,
    candidates: list[RerankCandidate[Key]],
    options: SearchOptions,
) -> dict[int, float] | None:
    """Candidate index -> LLM score, or None when the rerank is unavailable or failed."""
    model = llm.rerank_model
    ckey = cache_key(query, [c.id for c in candidates], model)
    ttl = options.rerank_cache_ttl_seconds
    cached = await cache.scores(ckey, ttl) if cache is not None else None
    if cached is not None:
        by_id = {_key_str(c.id): i for i, c in enumerate(candidates)}
        return {by_id[k]: v for k, v in cached.items() if k in by_id} or None
    try:
        async with deadline.elsewhere():  # not database time (app.core.deadline)
            answer = await asyncio.wait_for(
                llm.complete(
                    RERANK_SYSTEM,
                    build_prompt(query, candidates),
                    max_tokens=RERANK_MAX_TOKENS,
                    model=model,
                ),
                timeout=options.rerank_timeout_seconds,
            )
    except Exception as exc:  # LLMError, timeout, anything: BM25 order stands.
        log.warning("rerank failed, keeping BM25 order: %s", type(exc).__name__)
        return None
    scores = parse_scores(answer, len(candidates))
    if scores is None:
        log.warning("rerank answer unusable, keeping BM25 order")
        return None
    if cache is not None:
        await cache.store(ckey, {_key_str(candidates[i].id): s for i, s in scores.items()}, ttl)
    return scores


async def search(
    conn: asyncpg.Connection,
    scope: SearchScope,
    query: str,
    *,
    limit: int,
    rerank: bool,
    llm: LLMClient | None = None,
    cache: RerankCache | None = None,
    options: SearchOptions | None = None,
    after: datetime | None = None,
    before: datetime | None = None,
    exclude_seqs: Sequence[int] = (),
    exclude_from: int | None = None,
    ranking: str = "conversation",
) -> SearchOutcome:
    """Rank the scope's messages for `query`; best `limit` first. `conn`: a connection of
    the hot paths' pool, or a route's (`app.auth.deps.DbDep`); the ranking statements run in
    a transaction of their own (a savepoint in the latter), the rerank outside it. `after`
    (inclusive) and `before` (exclusive) bound the results' `created_at`; a session search
    may leave out `exclude_seqs` and the seqs from `exclude_from` on (what a context shows already).
    `ranking="message"`: plain BM25 (no window, no prior; named dates still count)."""
    options = options or SearchOptions()
    terms = query_terms(query)
    if not terms:
        return SearchOutcome()
    windows = options.windows
    if ranking == "message":
        windows = replace(windows, window=0, weight=0.0, prior_weight=0.0, when_boost=1.0)
    dates = named_dates(normalize_query(query)) if windows.date_boost != 1 else []
    names = named_authors(query) if windows.speaker_boost != 1 else []
    when = windows.when_boost != 1 and asks_when(query)
    reranking = rerank and llm is not None
    async with conn.transaction():
        routed = await repository.custom_plans(conn, scope)
        lexemes, stats = await repository.prepare(conn, scope, " ".join(terms))
        if not lexemes:
            return SearchOutcome()
        # In BM25 order the first `limit` candidates are the answer: fetch them whole now.
        hits = await repository.bm25_top(
            conn,
            scope,
            lexemes,
            stats,
            BM25Params(options.k1, options.b),
            MAX_CANDIDATES,
            full_rows=0 if reranking else limit,
            windows=windows,
            after=after,
            before=before,
            exclude_seqs=exclude_seqs,
            dates=dates,
            exclude_from=exclude_from,
            routed=routed,
            names=names,
            when=when,
        )
    outcome = SearchOutcome(lexemes=lexemes, candidates=len(hits), dates=dates)
    if not hits:
        return outcome
    bm25 = {(h.session_id, h.seq): h.score for h in hits}
    ordered: list[tuple[Key, float | None]] = [(k, None) for k in bm25]
    if reranking:
        candidates = [
            RerankCandidate(
                id=(h.session_id, h.seq), role=h.role, text=h.preview, bm25_score=h.score
            )
            for h in hits
        ]
        assert llm is not None
        with usage.attributed("rerank", scope.tenant_id, session_id=scope.session_id) as asked:
            scores = await _rerank(llm, cache, normalize_query(query), candidates, options)
        outcome.rerank_skipped = asked.refused or ("unavailable" if scores is None else None)
        if scores is not None:
            outcome.reranked = True
            ordered = [(c.id, s) for c, s in order_by_scores(candidates, scores)]
    top = ordered[:limit]
    rows = {(h.session_id, h.seq): h.row for h in hits if h.row is not None}
    missing = [k for k, _ in top if k not in rows]
    if missing:
        rows.update(await repository.load_messages(conn, scope.tenant_id, missing))
    outcome.hits = [SearchHit(rows[k], bm25[k], s) for k, s in top if k in rows]
    return outcome


async def promote_seqs(
    conn: asyncpg.Connection, session_row: SessionRow, seqs: list[int]
) -> list[int]:
    """Promote messages of `session_row` into its context; the seqs promoted now.

    That is the requested seqs that are promoted after the call (already-promoted ones
    included; messages still in L1 are in the context anyway and are skipped) plus the
    tool_use/tool_result partners promotion adds to keep pairs whole. Raises the memory
    service's 409 (`over_budget`) when they would not fit the budget.
    """

    if not seqs:
        return []
    result = await promote_messages(conn, session_row, seqs)
    promoted = set(getattr(result, "promoted", None) or [])
    added = set(getattr(result, "added", None) or [])
    return sorted({s for s in seqs if s in promoted} | added)


async def promote_hits(
    conn: asyncpg.Connection, session_row: SessionRow, hits: list[SearchHit]
) -> list[int]:
    """Promote the hits that belong to `session_row` (see `promote_seqs`).

    Hits from other sessions (agent/tenant scope) are not promoted: promotion copies
    messages of the session itself into its context.
    """
    return await promote_seqs(
        conn, session_row, [h.message.seq for h in hits if h.message.session_id == session_row.id]
    )
