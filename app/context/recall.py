"""Automatic recall's reads (the I/O edge of `app.memory.recall`): the session's swap
searched with the conversation-aware ranking, and the messages around the hits.

Each read takes a connection of the hot paths' pool for itself, and only when the build
asks (a session without recall, or without room for it, reads nothing more).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from app.memory.recall import RecallConfig
from app.models.message import StoredMessage, message_row_sql
from app.search import service as search_service
from app.search.deps import options_for
from app.search.scope import SearchScope
from app.state import AppState

_LOAD = f"""
SELECT {message_row_sql()} FROM messages
WHERE tenant_id = $1 AND session_id = $2 AND seq = ANY($3::bigint[])
ORDER BY seq
"""


@dataclass
class SwapRecall:
    """`app.context.builder.RecallSource` over one session of the caller's tenant."""

    state: AppState
    tenant_id: uuid.UUID
    session_id: uuid.UUID
    config: RecallConfig

    async def search(self, query: str, exclude: list[int],
                     limit: int) -> list[tuple[Any, float]]:
        scope = SearchScope(tenant_id=self.tenant_id, session_id=self.session_id)
        async with self.state.connection() as conn:
            outcome = await search_service.search(
                conn, scope, query, limit=limit, rerank=False,
                options=options_for(self.state.settings), exclude_seqs=exclude)
        return [(h.message, h.bm25_score) for h in outcome.hits]

    async def load(self, seqs: list[int]) -> list[Any]:
        if not seqs:
            return []
        async with self.state.connection() as conn:
            rows = await conn.fetch(_LOAD, self.tenant_id, self.session_id, seqs)
        return [StoredMessage(*r) for r in rows]


def recall_config(session_config: dict[str, Any] | None, requested: Any = None) -> RecallConfig:
    """The recall of one build: the request's (`ContextRequest.recall`), else the
    session's stored `config.recall`."""
    if requested is not None:
        return RecallConfig.from_stored(requested.model_dump())
    return RecallConfig.from_stored((session_config or {}).get("recall"))
