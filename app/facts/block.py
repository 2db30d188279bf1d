"""The "facts" context block (registered first in `app.wiring`, so it follows ROM and
Kernel): the valid facts of the session's fact scope that answer the recall query or the
newest user message (facts whose key's attribute it asks about, then text
matches without the scope's own frequent words; `app.facts.policy.context_tier`), then
the most important others, within `facts.share` of the budget
and only in what the layers left free — blocks are dropped before L1 is cut, so the facts
shrink first and the budget holds. The choice is `app.facts.policy.choose_for_context`;
this module only reads."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import asyncpg

from app.context.blocks import ContextBlock, OpenDb, newest_user_text
from app.core.tokens import count_text
from app.facts import repository as repo
from app.facts.extract import fact_scope
from app.facts.policy import (
    MIN_FACTS_TOKENS,
    FactLine,
    FactsConfig,
    choose_for_context,
    context_tier,
    fit_text,
    key_matches_query,
    render_block,
    when_known,
    words_of,
)
from app.knowledge.asof import read_then
from app.memory.policy import MemoryConfig

CANDIDATES = 50


WHEN_DOC = (
    '"since": when it became true; "said": when it was said (when it became true is not known)'
)


async def _candidates(
    conn: asyncpg.Connection, tid: Any, scope: Any, agent: str, query: str, as_of: datetime | None
) -> list[Any]:
    """The facts the block may show, best first (`app.facts.policy.context_tier`): those
    whose key's attribute the query asks about, the text matches of the query (the
    scope's own frequent words left out), then the most important; each tier by score,
    then importance."""
    words = words_of(query)
    rows: dict[Any, Any] = {}
    if words:
        keys = await repo.key_counts(conn, tid, scope, agent_id=agent, limit=500, as_of=as_of)
        asked = [k for k, _ in keys if key_matches_query(k, words)]
        for r in await repo.facts_of_keys(
            conn, tid, scope, asked, agent_id=agent, limit=CANDIDATES, as_of=as_of
        ):
            rows.setdefault(r.id, r)
        for r in await repo.nearest_facts(
            conn,
            tid,
            scope,
            query,
            limit=CANDIDATES,
            agent_id=agent,
            as_of=as_of,
            drop_stop_words=True,
        ):
            rows[r.id] = r  # with its score
    for r in await repo.top_facts(conn, tid, scope, limit=CANDIDATES, agent_id=agent, as_of=as_of):
        rows.setdefault(r.id, r)

    def rank(r: Any) -> tuple[int, float, float, float]:
        score = float(getattr(r, "rank", 0.0) or 0.0)
        tier = context_tier(r.fact_key, r.text or "", words, score)
        return (tier, -score, -float(r.importance), -r.created_at.timestamp())

    return sorted(rows.values(), key=rank)


def header(scope: str, as_of: datetime | None = None) -> str:
    if as_of is not None:
        return (
            f"## Facts remembered ({scope}), as of {as_of:%Y-%m-%d %H:%M} UTC\nDurable "
            f"facts from earlier conversations that were true then ({WHEN_DOC}):"
        )
    return f"## Facts remembered ({scope})\nDurable facts from earlier conversations ({WHEN_DOC}):"


def fact_line(text: str | None, when: str) -> str:
    return f"{(text or '').strip()}" + (f" ({when})" if when else "")


def replay_line(row: Any, source: Mapping[str, Any]) -> str:
    """A recorded line again: with the time label the build recorded (older manifests
    recorded none: they said "since" the item's `valid_from`)."""
    when = source.get("when")
    if when is None:
        when = f"since {row.valid_from:%Y-%m-%d}" if row.valid_from is not None else ""
    return fact_line(row.text, str(when))


async def facts_provider(
    open_db: OpenDb,
    session_row: Any,
    budget_tokens: int,
    newest_user: str | None = None,
    *,
    as_of: datetime | None = None,
    query: str | None = None,
) -> ContextBlock | None:
    """The "facts" block: the facts true now (or at `as_of`, the request's `facts_as_of`)
    best matching `query` (the build's recall query; None: the newest user message)."""
    cfg = FactsConfig.from_stored((session_row.config or {}).get("facts"))
    if not cfg.enabled:
        return None
    tokens = cfg.tokens(MemoryConfig.from_stored(session_row.config).budget, budget_tokens)
    if tokens < MIN_FACTS_TOKENS:
        return None
    scope = fact_scope(cfg, session_row.agent_id, session_row.user_id)
    tid, agent = session_row.tenant_id, session_row.agent_id
    async with open_db() as conn:  # the build's connection for its blocks (app.context)
        query = query or await newest_user_text(conn, session_row, newest_user)
        rows = await _candidates(conn, tid, scope, agent, query, as_of)
        if as_of is not None:
            rows = await read_then(conn, tid, rows, as_of)
        replaced = await repo.replaced_any(conn, tid, [r.id for r in rows])
    if not rows:
        return None
    head = header(str(scope), as_of)
    whens = [
        when_known(
            r.valid_from,
            getattr(r, "stated_at", None),
            getattr(r, "created_at", None),
            replaced=r.id in replaced,
        )
        for r in rows
    ]
    lines = [fact_line(r.text, w) for r, w in zip(rows, whens, strict=True)]
    ranked = [
        FactLine(r.id, line, count_text("- " + line)) for r, line in zip(rows, lines, strict=True)
    ]
    chosen = choose_for_context(ranked, tokens, count_text(head))
    if not chosen.lines:
        return None
    fitted = fit_text(head, [f.line for f in chosen.lines], tokens, count_text)
    if fitted is None:
        return None
    text, n = fitted
    # what the manifest records (app.context.manifest), and what replays the block
    by_id = {r.id: r for r in rows}
    kept = list(chosen.lines)
    while kept and render_block(head, [f.line for f in kept]) != text:
        kept.pop()  # the lines fit_text dropped
    when = {r.id: w for r, w in zip(rows, whens, strict=True)}
    sources = tuple(
        {
            "kind": "fact",
            "id": str(f.id),
            "version": by_id[f.id].version,
            "score": getattr(by_id[f.id], "rank", None),
            "when": when[f.id],
        }
        for f in kept
    )
    return ContextBlock(
        name="facts",
        text=text,
        token_count=n,
        sources=sources,
        replay={"header": head, "limit": tokens, "share": cfg.share, "query": query},
        why=(
            f"{len(sources)} valid fact(s) of the session's fact scope: "
            f"{sum(s['score'] is not None for s in sources)} matched the newest user message "
            "(BM25 score in each source), the rest are the most important others"
        ),
    )
