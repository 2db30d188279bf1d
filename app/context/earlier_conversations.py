"""Recall across a user's sessions: the "earlier conversations" context block.

With `config.user_recall` on, a session with a user gets, after ROM, Kernel and the facts,
the best-matching turns of that user's *other* sessions with the same agent (the session
rule: an agent sees its own sessions; `app.users.access` for the user), searched with the
newest user message (the conversation-aware BM25 of `app.search`), each line dated and
cut, within `share` of the budget and only in what is free (blocks shrink before L1 is
cut). A session's own old turns are automatic recall's (`config.recall`), not this block's.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from app.context.blocks import BlockProvider, ContextBlock, OpenDb, newest_user_text
from app.core.tokens import count_text
from app.memory.policy import MemoryConfig
from app.search import service as search_service
from app.search.deps import options_for
from app.search.scope import SearchScope

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    import asyncpg

    from app.core.config import Settings

HEADER = (
    "## Earlier conversations with this user\nTurns from your other sessions with "
    "this person that match the current message:"
)
LINE_CHARS = 400
MIN_TOKENS = 32


def line(role: str, created_at: Any, text: str) -> str:
    when = f"{created_at:%Y-%m-%d}" if hasattr(created_at, "strftime") else str(created_at)[:10]
    body = " ".join(text.split())
    if len(body) > LINE_CHARS:
        body = body[:LINE_CHARS] + "…"
    return f"- [{when}] {role}: {body}"


def fit(lines: list[str], tokens: int, count: Callable[[str], int]) -> tuple[str, int] | None:
    """The header and the first lines that fit `tokens` (re-counted as a whole)."""
    kept = list(lines)
    while kept:
        text = "\n".join([HEADER, *kept])
        n = count(text)
        if n <= tokens:
            return text, n
        kept.pop()
    return None


def provider(
    connection: Callable[[], AbstractAsyncContextManager[asyncpg.Connection]], settings: Settings
) -> BlockProvider:
    """The block provider over the hot-path pool's `connection` (the search runs on
    asyncpg)."""

    async def user_recall(
        open_db: OpenDb,
        session_row: Any,
        budget_tokens: int,
        newest_user: str | None = None,
        *,
        as_of: datetime | None = None,
        query: str | None = None,
    ) -> ContextBlock | None:
        cfg = (session_row.config or {}).get("user_recall")
        user_id = session_row.user_id
        if not cfg or not cfg.get("enabled", True) or not user_id:
            return None
        budget = MemoryConfig.from_stored(session_row.config).budget
        tokens = min(budget_tokens, int(budget * float(cfg.get("share", 0.05))))
        if tokens < MIN_TOKENS:
            return None
        query = newest_user
        if query is None:
            async with open_db() as conn:
                query = await newest_user_text(conn, session_row, None)
        if not query or not query.strip():
            return None
        most = int(cfg.get("max_messages", 6))
        scope = SearchScope(
            tenant_id=session_row.tenant_id, user_id=user_id, agent_id=session_row.agent_id
        )
        async with connection() as conn:
            outcome = await search_service.search(
                conn, scope, query, limit=most * 3, rerank=False, options=options_for(settings)
            )
        own = str(session_row.id)
        hits = [h.message for h in outcome.hits if str(h.message.session_id) != own][:most]
        lines = [line(m.role, m.created_at, m.text or "") for m in hits if m.text]
        fitted = fit(lines, tokens, count_text)
        if fitted is None:
            return None
        return ContextBlock(name="user_recall", text=fitted[0], token_count=fitted[1])

    return user_recall
